"""``Accelerator``: the SpecMamba/SPEQ top level on AXI, with the tree-verification scheduler.

Block diagram (``docs/accelerator.md`` has the full description)::

    s_axi (AXI4-Lite) ──> AXI4LiteRegisterFile ──> control, status, tree tables, counters
                                 │ LIN_CMD + GO              │ START / MATCH_GO / ROLLBACK
                                 v                           v
    s_axis_lin_w ──> ┌──────────────┐              ┌─────────────────────┐
    s_axis_lin_x ──> │  LinearUnit  │ ──> m_axis_lin_y   │ scheduler (FSM)   │<── TreeVerifier
                     └──────────────┘              └─────────────────────┘     (schedule, path)
                                                         │ CHECKPOINT/RESTORE/CAPTURE/REPLAY
    s_axis_ssm (tuser = wr_sel, wr_addr; ─> gate ─> StateController <──> SSMUnit
                tlast commits the token)              │ y (replayed rows dropped)
                                                      v
                                                 m_axis_ssm_y

The linear unit and the SSM path share nothing but the register file, so a
linear job (started from registers) runs while the SSM unit sweeps: that is
SpecMamba's linear/SSM overlap (arXiv 2509.19873: linear layers in parallel, SSM
layers in series), measured by the
``PERF_OVERLAP`` counter.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.config import Config

from .axi_lite import AXI4LiteRegisterFile, AXI4LiteSignature
from .axi_stream import AXI4StreamSignature, axis_to_stream, stream_to_axis, tdata_width
from .bits import OneHot, index_width
from .hierarchy import submodule, template
from .linear_unit import linear_unit_for
from .perf_counter import PerfCounter
from .regmap import ERROR_CODES, accelerator_regmap
from .ssm_unit import SSMUnit
from .state_controller import Op, StateController, connect_ssm
from .tree_verifier import TreeVerifier

__all__ = ["Accelerator", "ERROR", "SSM_TUSER_SEL_BITS"]

#: ``STATUS.ERROR_CODE`` values by name (:data:`hw.regmap.ERROR_CODES`).
ERROR = {e.name: e.value for e in ERROR_CODES}

#: ``tuser`` bits ``[2:0]`` of ``s_axis_ssm`` carry ``wr_sel``; ``wr_addr`` follows.
SSM_TUSER_SEL_BITS = 3

#: First ``wr_sel`` code of a layer parameter (``SEL_A``); frames of parameters commit nothing.
_SEL_PARAM = 4


COUNTER_BITS = 48
#: Low part of each split event counter (:class:`hw.perf_counter.PerfCounter`).
COUNTER_LOW_BITS = 12


class Accelerator(wiring.Component):
    """The accelerator: linear unit, SSM unit, state controller, tree verifier, scheduler.

    Parameters
    ----------
    config : golden.config.Config
        A preset (``golden.config.preset``) or a custom config. ``tree.max_nodes``
        must be ≥ 2; the SSM config must suit :class:`hw.ssm_unit.SSMUnit`
        (``state_format="fp32"``, ``lanes <= d_state``). The state controller
        gets ``tree.fifo_depth + 1`` slots (the ring's slots and the committed
        slot :attr:`committed_slot`) and ``tree.max_nodes`` replay records.

    Attributes
    ----------
    s_axi : In(AXI4LiteSignature(addr_width=regmap.addr_width))
        Control and status (:func:`hw.regmap.accelerator_regmap`, ``docs/regmap.md``).
    s_axis_lin_w : In(AXI4StreamSignature(data_width=tdata_width(weight_layout)))
        Linear-unit weight beats (:func:`hw.linear_unit.weight_layout` in the low
        bits of ``tdata``), ``LIN_STEPS`` per job; ``tlast`` is ignored.
    s_axis_lin_x : In(AXI4StreamSignature(data_width=tdata_width(act_layout)))
        Activation beats (:func:`hw.linear_unit.act_layout`), in step with the weights.
    m_axis_lin_y : Out(AXI4StreamSignature(data_width=tdata_width(result_layout)))
        Result rows (:func:`hw.linear_unit.result_layout`); ``tlast`` on a job's last row.
    s_axis_ssm : In(AXI4StreamSignature(data_width=32·input_words, user_width=3 + addr_bits))
        The SSM unit's input beats: ``tdata`` ``ssm.input_words`` binary32 values
        (word ``i`` in bits ``32i …``), ``tuser[2:0]`` ``wr_sel`` and ``tuser[3:]``
        ``wr_addr``, the beat index (:class:`hw.ssm_unit.SSMUnit`).
        A beat with ``tlast`` writes its word and commits the token, unless its
        ``wr_sel`` is a layer parameter (``≥ SEL_A``): a frame of parameters
        commits nothing. ``tready`` is low while the unit's fill bank is busy,
        and, during a target step, everywhere except in the scheduler's token
        window (one token per tree node, in BFS order).
    m_axis_ssm_y : Out(AXI4StreamSignature(data_width=32))
        ``y[h, p]`` of every host token, row-major, ``tlast`` on ``y[H−1, P−1]``.
        Rows of replayed tokens are not sent. The consumer must keep draining
        (a checkpoint waits for every earlier token's rows).
    irq : Out(1)
        ``CTRL.IRQ_EN`` and (``STATUS.DONE`` or ``STATUS.ERROR``).

    Notes
    -----
    A target step (``MODE.MODE = TARGET``, ``CTRL.START``), cycle costs with
    ``T`` = :attr:`state_tiles`, the unit drained and no back-pressure:

    1. ``CHECKPOINT`` of the committed state into :attr:`committed_slot` (``T + 2``).
    2. The tree is read from ``TREE_PARENT`` into the ``TreeVerifier`` (one node per cycle).
    3. Per node of the FIFO schedule: ``RESTORE`` of its parent's slot, or of the
       committed slot for the root (``T + 2``; skipped when the unit already holds
       that state, e.g. the first child right after its parent), ``CAPTURE``
       into record ``node`` (2), the token window (the host's
       ``2·N + H·P + H`` words), then ``CHECKPOINT`` into ``write_slot``
       (``T + 2`` after the token's ``y`` rows have drained).
    4. After ``CTRL.MATCH_GO`` the match bits (``TREE_MATCH``) go to the verifier,
       one per cycle; the accepted path lands in ``TREE_RESULT`` / ``TREE_PATH``.
    5. Commit: ``RESTORE`` of the committed slot (``T + 2``), then ``REPLAY`` of each
       path node's record (``W + 2`` each, ``W = N + H·P + H``); ``STATUS.DONE``
       once the replayed tokens have left the unit.

    ``MODE = DRAFT``: ``START`` only checkpoints the committed state (so a
    ``ROLLBACK`` can undo the draft tokens that follow) and sets ``DONE``; the
    SSM stream stays open. ``CTRL.ROLLBACK`` restores the committed slot.
    ``CTRL.ABORT`` stops a step at the next command boundary and drains the
    tree verifier. The first error since the last clear sets ``STATUS.ERROR``
    and ``ERROR_CODE`` (:data:`ERROR`).

    Linear jobs: ``LIN_CMD``/``LIN_STEPS`` then ``LIN_CTRL.GO`` queue one job
    (one waiting job at most); the unit takes it when free and streams
    ``s_axis_lin_*`` meanwhile, independently of the SSM path.
    """

    def __init__(self, *, config):
        if not isinstance(config, Config):
            raise TypeError(f"Accelerator.config must be a golden.config.Config, not {config!r}")
        if config.tree.max_nodes < 2:
            raise ValueError(f"Accelerator.config.tree.max_nodes must be >= 2 (the root and one "
                             f"draft node), not {config.tree.max_nodes!r}")
        self._config = config
        self._regmap = accelerator_regmap(config)
        # Templates: they validate now and give widths; elaborate builds its own.
        self._lin = template(linear_unit_for(config, weight_ports=1))
        self._ssm = template(SSMUnit(**self._ssm_args()))
        self._ctrl = template(StateController(**self._ctrl_args()))
        self._tv = template(TreeVerifier.from_config(config))
        self._addr_bits = len(self._ssm.wr_addr)
        self._w_layout, self._x_layout, self._y_layout, self._cmd_layout = (
            self._lin.signature.members[name].signature.members["payload"].shape
            for name in ("w", "x", "y", "cmd"))
        super().__init__({
            "s_axi": In(AXI4LiteSignature(addr_width=self._regmap.addr_width)),
            "s_axis_lin_w": In(AXI4StreamSignature(data_width=self.weight_port_width)),
            "s_axis_lin_x": In(AXI4StreamSignature(data_width=tdata_width(self._x_layout))),
            "m_axis_lin_y": Out(AXI4StreamSignature(data_width=tdata_width(self._y_layout))),
            "s_axis_ssm": In(AXI4StreamSignature(
                data_width=32 * self._config.ssm.input_words, user_width=SSM_TUSER_SEL_BITS + self._addr_bits)),
            "m_axis_ssm_y": Out(AXI4StreamSignature(data_width=32)),
            "irq": Out(1),
        })

    def _ssm_args(self):
        pipe = self._config.pipeline
        return dict(cfg=self._config.ssm, mul_stages=pipe.fp_mul_stages,
                    add_stages=pipe.fp_add_stages)

    def _ctrl_args(self):
        tree = self._config.tree
        return dict(ssm_cfg=self._config.ssm, slots=tree.fifo_depth + 1, records=tree.max_nodes,
                    conv_depth=0)

    @classmethod
    def from_config(cls, config):
        """The accelerator of a ``golden.config.Config`` (every block of it built from it)."""
        return cls(config=config)

    # -- parameters and timing ------------------------------------------------------------

    config = property(lambda self: self._config)

    @property
    def weight_port_width(self):
        """``tdata`` bits of ``s_axis_lin_w``: one weight beat (``exact``), or one
        column's weight beat (``dspfp32``: beats go to the columns in turn)."""
        return tdata_width(self._w_layout)
    regmap = property(lambda self: self._regmap)
    weight_layout = property(lambda self: self._w_layout)
    act_layout = property(lambda self: self._x_layout)
    result_layout = property(lambda self: self._y_layout)

    @property
    def ssm_addrindex_width(self):
        """Bits of ``wr_addr`` in ``s_axis_ssm.tuser[3:]``."""
        return self._addr_bits

    @property
    def committed_slot(self):
        """State-controller slot of the committed state: ``fifo_depth`` (after the ring's)."""
        return self._config.tree.fifo_depth

    @property
    def state_tiles(self):
        """Tiles a checkpoint or restore moves: ``nheads·headdim·d_state/lanes``."""
        return self._ctrl.state_tiles

    @property
    def copy_cycles(self):
        """Cycles of one ``RESTORE`` or ``CHECKPOINT``, unit drained: ``state_tiles + 2``."""
        return self._ctrl.restore_cycles

    @property
    def replay_cycles(self):
        """Cycles of one ``REPLAY`` to its commit: ``record_words + 2``."""
        return self._ctrl.replay_cycles

    @property
    def module_name(self):
        """Verilog name encoding the config, e.g.
        ``Accelerator_sim_r2c4q3k16_h2p2n8l4_t64d16_p222`` (``p``: the FP multiply,
        FP add and PE rounding stages of ``config.pipeline``)."""
        c = self._config
        s, t, lin, p = c.ssm, c.tree, c.linear, c.pipeline
        arr = (f"r{lin.rows}c{lin.cols}q{lin.quant_lanes}k{lin.max_k}" if lin.contract == "exact"
               else f"d{lin.rows}x{lin.cols}t{lin.max_tokens}k{lin.max_k}")
        return (f"Accelerator_{c.name}_{arr}"
                f"_h{s.nheads}p{s.headdim}n{s.d_state}l{s.lanes}_t{t.max_nodes}d{t.fifo_depth}"
                f"_p{p.fp_mul_stages}{p.fp_add_stages}{p.pe_round_stages}")

    # -- logic ----------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        H, P, N = cfg.ssm.state_shape
        max_nodes = cfg.tree.max_nodes
        nb = index_width(max_nodes)

        rf = AXI4LiteRegisterFile(regmap=self._regmap)
        m.submodules.regs = rf
        wiring.connect(m, wiring.flipped(self.s_axi), rf.s_axi)

        lin = submodule(m, "linear", linear_unit_for(cfg, weight_ports=1))
        ssm = submodule(m, "ssm", SSMUnit(**self._ssm_args()))
        ctrl = submodule(m, "state", StateController(**self._ctrl_args()))
        tv = TreeVerifier.from_config(cfg)
        m.submodules.tree = tv
        connect_ssm(m, ctrl, ssm)
        m.d.comb += [ctrl.conv_idle.eq(1), ctrl.conv_rdata.eq(0), tv.passes.eq(1)]

        # ---- errors and status ---------------------------------------------------------
        err = Signal()
        err_code = Signal(4)
        code = Signal(4)
        m.d.comb += [rf.status_error_set.eq(err), rf.status_error_code.eq(code),
                     self.irq.eq(rf.ctrl_irq_en & (rf.status_done | rf.status_error))]
        # The code of the first error since ERROR was last cleared.
        with m.If(err & ~rf.status_error):
            m.d.sync += code.eq(err_code)

        def fail(name):
            m.d.comb += [err.eq(1), err_code.eq(ERROR[name])]

        # ---- linear unit: jobs from registers, data on AXI4-Stream ---------------------
        lin_pending = Signal()
        lin_cmd = Signal(self._cmd_layout)
        lcfg = cfg.linear
        lin_bad = Signal()
        # The checks of LIN_CMD and LIN_STEPS are registered, as the scheduler's
        # checks below (GO is a write of its own, at least three cycles after theirs).
        lin_regs_bad = Signal()
        m.d.sync += lin_regs_bad.eq(
            ~rf.lin_cmd_n_rows.any() | (rf.lin_cmd_n_rows > lcfg.tile_rows)
            | ~rf.lin_cmd_n_tokens.any() | (rf.lin_cmd_n_tokens > lcfg.token_lanes)
            | ~rf.lin_steps_steps.any() | (rf.lin_steps_steps > lcfg.max_k))
        m.d.comb += lin_bad.eq(lin_regs_bad | lin_pending)
        m.d.comb += [lin.cmd.valid.eq(lin_pending), lin.cmd.payload.eq(lin_cmd)]
        with m.If(lin.cmd.valid & lin.cmd.ready):
            m.d.sync += lin_pending.eq(0)
        with m.If(rf.lin_ctrl_go):
            with m.If(lin_bad):
                fail("LINEAR_CMD")
            with m.Else():
                m.d.sync += [lin_pending.eq(1), lin_cmd.mode.eq(rf.lin_cmd_mode),
                             lin_cmd.steps.eq(rf.lin_steps_steps),
                             lin_cmd.n_rows.eq(rf.lin_cmd_n_rows),
                             lin_cmd.n_tokens.eq(rf.lin_cmd_n_tokens)]
        # (The DSPFP32 array takes column beats on one port: a stand-in for the
        # memory system's read masters, one column per cycle.)
        lin_w = lin.w[0] if cfg.linear.contract == "dspfp32" else lin.w
        axis_to_stream(m, self.s_axis_lin_w, lin_w)
        axis_to_stream(m, self.s_axis_lin_x, lin.x)
        stream_to_axis(m, lin.y, self.m_axis_lin_y, last=lin.y.payload.last)
        jobs_done = Signal(16)
        with m.If(lin.y.valid & lin.y.ready & lin.y.payload.last):
            m.d.sync += jobs_done.eq(jobs_done + 1)
        m.d.comb += [rf.lin_status_pending.eq(lin_pending), rf.lin_status_jobs_done.eq(jobs_done)]
        lin_fire = Signal()
        # A busy cycle: a beat into the PE array (exact), an operation of the MAC
        # slots (dspfp32: one activation each).
        busy_port = lin.x if cfg.linear.contract == "dspfp32" else lin_w
        m.d.comb += lin_fire.eq(busy_port.valid & busy_port.ready)
        # Mode of the job whose beats are flowing: a job is taken only once the
        # previous one has issued its last beat.
        lin_mode = Signal()
        with m.If(lin.cmd.valid & lin.cmd.ready):
            m.d.sync += lin_mode.eq(lin.cmd.payload.mode)

        # ---- SSM input stream: a gate in front of the state controller -----------------
        s = self.s_axis_ssm
        ssm_open = Signal()
        sel = s.tuser[:SSM_TUSER_SEL_BITS]
        commit = Signal()
        m.d.comb += [
            commit.eq(s.tlast & (sel < _SEL_PARAM)),
            ctrl.wr_sel.eq(sel),
            ctrl.wr_addr.eq(s.tuser[SSM_TUSER_SEL_BITS:]),
            ctrl.wr_data.eq(s.tdata),
            s.tready.eq(ssm_open & ctrl.fill_free & (~commit | ctrl.token_ready)),
            ctrl.wr_en.eq(s.tvalid & s.tready),
            ctrl.token_valid.eq(s.tvalid & commit & ssm_open & ctrl.fill_free),
        ]
        token_done = Signal()
        m.d.comb += token_done.eq(ctrl.token_valid & ctrl.token_ready)

        y_row = Signal(index_width(H * P))
        y_last = Signal()
        m.d.comb += y_last.eq(y_row == H * P - 1)
        m.d.comb += [self.m_axis_ssm_y.tdata.eq(ctrl.y.payload),
                     self.m_axis_ssm_y.tvalid.eq(ctrl.y.valid),
                     self.m_axis_ssm_y.tlast.eq(y_last),
                     ctrl.y.ready.eq(self.m_axis_ssm_y.tready)]
        with m.If(ctrl.y.valid & ctrl.y.ready):
            m.d.sync += y_row.eq(0 if H * P == 1 else (y_row + 1)[:len(y_row)])
            with m.If(y_last):
                m.d.sync += y_row.eq(0)

        # ---- the scheduler ---------------------------------------------------------------
        committed = self.committed_slot
        count = Signal(range(max_nodes + 1))      # nodes of the tree being verified
        # count - 1 (modulo its width), kept in a register so that `i == count - 1`
        # is an equality of two registers, not a subtract then compare.
        count_m1 = Signal(len(count), init=(1 << len(count)) - 1)
        i = Signal(range(max_nodes + 1))          # node index while loading / matching
        prev_parent = Signal(nb)
        order_bad = Signal()
        beat = Signal(tv.schedule_layout)         # the schedule beat being processed
        held = Signal(range(committed + 1))       # slot whose state the unit holds ...
        held_ok = Signal()                        # ... if valid
        sent = Signal()                           # the current command was taken
        path_len = Signal(range(max_nodes + 1))
        k = Signal(range(max_nodes + 1))
        abort = Signal()
        target = Signal()
        step_cycles = Signal(COUNTER_BITS)
        res_tokens = Signal(nb + 1)
        res_last = Signal(nb)

        path_mem = Memory(shape=nb, depth=max_nodes, init=[])
        m.submodules.path = path_mem
        path_w = path_mem.write_port()
        path_rd = path_mem.read_port(domain="comb")
        path_host = path_mem.read_port(domain="comb")
        m.d.comb += [path_host.addr.eq(rf.tree_path_index[:index_width(max_nodes)]),
                     rf.tree_path_node.eq(Mux(rf.tree_path_index < path_len, path_host.data, 0)),
                     path_rd.addr.eq(k),
                     rf.tree_result_tokens.eq(res_tokens), rf.tree_result_last_node.eq(res_last)]

        m.d.comb += [rf.tree_parent_addr.eq(i), rf.tree_match_addr.eq(i), ctrl.resp.ready.eq(1)]
        with m.If(rf.ctrl_abort):
            m.d.sync += abort.eq(1)
        # MATCH_GO may come while the last node's checkpoint still runs: keep it.
        match_req = Signal()
        with m.If(rf.ctrl_match_go):
            m.d.sync += match_req.eq(1)

        def command(op, index, then):
            """Offer ``op index`` until taken, then wait for its response."""
            m.d.comb += [ctrl.cmd.valid.eq(~sent), ctrl.cmd.payload.op.eq(op),
                         ctrl.cmd.payload.index.eq(index)]
            with m.If(ctrl.cmd.valid & ctrl.cmd.ready):
                m.d.sync += sent.eq(1)
            with m.If(sent & ctrl.resp.valid):
                m.d.sync += sent.eq(0)
                with m.If(ctrl.resp.payload.error):
                    fail("STATE")
                    goto("FLUSH")
                with m.Elif(abort):
                    goto("FLUSH")
                with m.Else():
                    then()

        # The scheduler's states, one-hot (reset: IDLE). Verilator's -Wall rejects
        # the comparisons with 0 and the incomplete case statements of a binary
        # encoded m.FSM, as in hw.tree_verifier.
        names = ("IDLE", "ROLLBACK", "CHECKPOINT_COMMITTED", "LOAD", "NEXT", "RESTORE",
                 "CAPTURE", "TOKEN", "CHECKPOINT_NODE", "WAIT_MATCH", "MATCH", "PATH",
                 "COMMIT_RESTORE", "REPLAY", "DRAIN", "FLUSH")
        state = OneHot(names, init="IDLE", prefix="st_")

        def goto(name):
            state.goto(m, name)

        def then_goto(name):
            return lambda: goto(name)

        # The checks of the DIM_SSM and TREE_DESC registers, registered (logic
        # levels, docs/estimate.md). No behaviour changes: START is a write of its
        # own, and two AXI4-Lite writes commit at least three cycles apart
        # (hw.axi_lite: BVALID blocks AWREADY), so the checks have settled on the
        # values of every earlier write by the cycle START reaches the scheduler.
        dims_bad = Signal()
        tree_bad = Signal()
        node_count = rf.tree_desc_node_count
        m.d.sync += [
            dims_bad.eq(~rf.dim_ssm_nheads.any() | (rf.dim_ssm_nheads > H)
                        | ~rf.dim_ssm_headdim.any() | (rf.dim_ssm_headdim > P)
                        | ~rf.dim_ssm_d_state.any() | (rf.dim_ssm_d_state > N)),
            tree_bad.eq(~node_count.any() | (node_count > max_nodes)),
        ]

        done = Signal()
        m.d.comb += rf.status_done_set.eq(done)
        # Every state but IDLE is busy (the states are one-hot).
        busy = Signal()
        m.d.comb += [busy.eq(~state["IDLE"]), rf.status_busy.eq(busy)]
        # ---- the scheduler's sequence --------------------------------------------------
        with m.If(state["IDLE"]):
            m.d.comb += ssm_open.eq(1)
            m.d.sync += [abort.eq(0), sent.eq(0), match_req.eq(0)]
            with m.If(rf.ctrl_start):
                with m.If(dims_bad):
                    fail("DIMENSIONS")
                with m.Elif(rf.mode_mode & tree_bad):
                    fail("TREE_SIZE")
                with m.Else():
                    m.d.sync += [target.eq(rf.mode_mode), count.eq(node_count),
                                 count_m1.eq(node_count - 1), i.eq(0),
                                 order_bad.eq(0), held_ok.eq(0), step_cycles.eq(0)]
                    goto("CHECKPOINT_COMMITTED")
            with m.Elif(rf.ctrl_rollback):
                goto("ROLLBACK")
        with m.If(state["ROLLBACK"]):
            command(Op.RESTORE, committed, then_goto("IDLE"))
        with m.If(state["CHECKPOINT_COMMITTED"]):

            def after_checkpoint():
                m.d.sync += [held.eq(committed), held_ok.eq(1)]
                with m.If(target):
                    goto("LOAD")
                with m.Else():
                    m.d.comb += done.eq(1)
                    goto("IDLE")
            command(Op.CHECKPOINT, committed, after_checkpoint)
        with m.If(state["LOAD"]):
            parent = rf.tree_parent_parent
            m.d.comb += [tv.tree.valid.eq(1), tv.tree.payload.parent.eq(parent),
                         tv.tree.payload.last.eq(i == count_m1)]
            with m.If(tv.tree.ready):
                m.d.sync += [i.eq(i + 1), prev_parent.eq(parent)]
                with m.If(i.any() & ((parent >= i) | ((i > 1) & (parent < prev_parent)))):
                    m.d.sync += order_bad.eq(1)
                with m.If(i == count_m1):
                    m.d.sync += i.eq(0)
                    goto("NEXT")
        with m.If(state["NEXT"]):
            with m.If(tv.error):
                with m.If(order_bad):
                    fail("TREE_ORDER")
                with m.Else():
                    fail("TREE_OVERFLOW")
                goto("FLUSH")
            with m.Elif(abort):
                goto("FLUSH")
            with m.Elif(tv.schedule.valid):
                m.d.comb += tv.schedule.ready.eq(1)
                m.d.sync += beat.eq(tv.schedule.payload)
                with m.If(tv.schedule.payload.node_valid):
                    goto("RESTORE")
        with m.If(state["RESTORE"]):
            src = Signal(range(committed + 1))
            m.d.comb += src.eq(Mux(beat.root, committed, beat.parent_slot))

            def after_restore():
                m.d.sync += [held.eq(src), held_ok.eq(1)]
                goto("CAPTURE")
            with m.If(held_ok & (held == src)):
                # The unit already holds the parent's state (a first child
                # right after its parent): no copy.
                goto("CAPTURE")
            with m.Else():
                command(Op.RESTORE, src, after_restore)
        with m.If(state["CAPTURE"]):
            command(Op.CAPTURE, beat.node, then_goto("TOKEN"))
        with m.If(state["TOKEN"]):
            m.d.comb += [ssm_open.eq(1)]
            with m.If(token_done):
                m.d.sync += held_ok.eq(0)
                goto("CHECKPOINT_NODE")
            with m.Elif(abort):
                goto("FLUSH")
        with m.If(state["CHECKPOINT_NODE"]):

            def after_node():
                m.d.sync += [held.eq(beat.write_slot), held_ok.eq(1)]
                with m.If(beat.last):
                    goto("WAIT_MATCH")
                with m.Else():
                    goto("NEXT")
            command(Op.CHECKPOINT, beat.write_slot, after_node)
        with m.If(state["WAIT_MATCH"]):
            with m.If(abort):
                goto("FLUSH")
            with m.Elif(match_req):
                m.d.sync += [i.eq(0), match_req.eq(0)]
                goto("MATCH")
        with m.If(state["MATCH"]):
            m.d.comb += [tv.match.valid.eq(1),
                         tv.match.payload.match.eq(rf.tree_match_match),
                         tv.match.payload.last.eq(i == count_m1)]
            with m.If(tv.match.ready):
                m.d.sync += i.eq(i + 1)
                with m.If(i == count_m1):
                    m.d.sync += [i.eq(0), k.eq(0)]
                    goto("PATH")
        with m.If(state["PATH"]):
            m.d.comb += [tv.path.ready.eq(1),
                         path_w.addr.eq(k), path_w.data.eq(tv.path.payload.node),
                         path_w.en.eq(tv.path.valid)]
            with m.If(tv.path.valid):
                m.d.sync += k.eq(k + 1)
                with m.If(tv.path.payload.last):
                    m.d.sync += [path_len.eq(tv.path.payload.tokens), k.eq(0),
                                 res_tokens.eq(tv.path.payload.tokens),
                                 res_last.eq(tv.path.payload.node)]
                    goto("COMMIT_RESTORE")
        with m.If(state["COMMIT_RESTORE"]):
            command(Op.RESTORE, committed, then_goto("REPLAY"))
        with m.If(state["REPLAY"]):

            def after_replay():
                m.d.sync += k.eq(k + 1)
                with m.If(k == path_len - 1):
                    goto("DRAIN")
            command(Op.REPLAY, path_rd.data, after_replay)
        with m.If(state["DRAIN"]):
            with m.If(~ctrl.busy):
                m.d.comb += done.eq(1)
                goto("IDLE")
        with m.If(state["FLUSH"]):
            # Drain the tree verifier (after an error or ABORT): take every
            # schedule beat, feed zero match bits, take the path.
            m.d.comb += [tv.schedule.ready.eq(1), tv.path.ready.eq(1),
                         tv.match.valid.eq(i < count), tv.match.payload.match.eq(0),
                         tv.match.payload.last.eq(i == count_m1)]
            with m.If(tv.match.valid & tv.match.ready):
                m.d.sync += i.eq(i + 1)
            with m.If(~tv.busy & ~sent):
                goto("IDLE")
            with m.If(sent & ctrl.resp.valid):
                m.d.sync += sent.eq(0)

        # ---- performance counters --------------------------------------------------------
        snap = rf.perf_ctrl_snapshot
        clear = rf.perf_ctrl_clear
        lin_stall_base = Signal(COUNTER_BITS)
        with m.If(clear):
            m.d.sync += lin_stall_base.eq(lin.stall_cycles)
        with m.If(busy & target):
            m.d.sync += step_cycles.eq(step_cycles + 1)
        steps_inc = done & target
        events = {
            "perf_cycles": 1,
            "perf_draft_cycles": lin_fire & lin_mode,
            "perf_verify_cycles": busy & target,
            "perf_tokens_accepted": Mux(steps_inc, path_len, 0),
            "perf_steps": steps_inc,
            "perf_linear_busy": lin_fire,
            "perf_ssm_busy": ~ssm.idle,
            "perf_overlap": lin_fire & ~ssm.idle,
            "perf_state_cycles": ctrl.busy,
            "perf_nodes": token_done & target & busy,
        }
        for name, inc in events.items():
            # Split counters (hw.perf_counter): the event logic meets only a
            # 12-bit adder, the upper 36 bits add a registered carry, so the
            # 48-bit count fits 400 MHz's 4 levels; the snapshot stays exact.
            counter = PerfCounter(width=COUNTER_BITS, low_bits=COUNTER_LOW_BITS,
                                  step_bits=len(path_len) if name == "perf_tokens_accepted" else 1)
            m.submodules[name] = counter
            m.d.comb += [counter.inc.eq(inc), counter.clear.eq(clear), counter.snap.eq(snap)]
            self._publish(m, rf, name, counter.value)
        stall_live = Signal(COUNTER_BITS)
        m.d.comb += stall_live.eq(lin.stall_cycles - lin_stall_base)
        self._snapshot(m, rf, "perf_stall_cycles", stall_live, snap)
        last_step = Signal(COUNTER_BITS)
        with m.If(steps_inc):
            m.d.sync += last_step.eq(step_cycles + 1)
        self._snapshot(m, rf, "perf_last_step", last_step, snap)
        return m

    @staticmethod
    def _publish(m, rf, name, held):
        m.d.comb += [getattr(rf, f"{name}_lo_value").eq(held[:32]),
                     getattr(rf, f"{name}_hi_value").eq(held[32:])]

    @staticmethod
    def _snapshot(m, rf, name, live, snap):
        held = Signal(COUNTER_BITS, name=f"{name}_snap")
        with m.If(snap):
            m.d.sync += held.eq(live)
        Accelerator._publish(m, rf, name, held)

