"""``Accelerator``: the SpecMamba/SPEQ top level on AXI, with the tree-verification scheduler.

Block diagram (``docs/accelerator.md`` has the full description)::

    s_axi (AXI4-Lite) ──> AXI4LiteRegisterFile ──> control, status, tree table, bases, counters
                                 │ LIN_CMD + GO          │ START / MATCH_GO / DRAFT_COMMIT
                                 v                       v
    m_axi_lin_w0..3 ──> ┌──────────────┐          ┌───────────────────┐
    m_axi_lin_x ──────> │ LinearEngine │ ──> m_axi_lin_y │ scheduler (FSM) │<── TreeVerifier
                        └──────────────┘          └───────────────────┘   (schedule, path)
                     (WeightStream, DSPLinearUnit)   │ node table, one descriptor per layer
                                                     v
                  m_axi_ssm_in, m_axi_ssm_st_rd* <── SSMEngine ──> m_axi_ssm_st_wr*, m_axi_ssm_y
                                    (TreeSSMUnit; every m_axi_* port in domain mem)

The SSM side feeds itself from memory (``golden.memory_map``): the host writes
the four ``MEM_*_BASE`` registers, the tree and the dimensions; the scheduler
writes the engine's node table from the tree verifier's FIFO schedule and, per
layer, a descriptor whose addresses it computes from the bases and the constant
strides of :func:`golden.memory_map.ssm_engine_layout` (a running sum per layer,
no multiply). Every layer's parameters (``weights.ssm_params``), node input
records and ``y`` (``io.ssm``) and state slots (``state.ssm``) are in memory.

The linear side feeds itself from memory too (:class:`hw.linear_engine.LinearEngine`):
a job's registers name its output tile and the byte addresses of its BSFP weight
planes, activations and results; the weights stream from the planes (the nibble plane
alone in a draft job), the activations from a fifth port, and the results go back
through a write port. The host writes registers and descriptors, never a data word.

The linear engine and the SSM path share nothing but the register file, so a
linear job (started from registers) runs while the SSM engine sweeps: that is
SpecMamba's linear/SSM overlap (arXiv 2509.19873: linear layers in parallel, SSM
layers in series), measured by the ``PERF_OVERLAP`` counter.
"""

from dataclasses import replace

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.config import Config
from specgen.golden.memory_map import ALIGN, SSM_BUFFERS, SSM_SLOTS, ssm_engine_layout
from specgen.golden.validate import check_int

from .axi_lite import AXI4LiteRegisterFile, AXI4LiteSignature
from .bits import OneHot, index_width
from .hierarchy import template
from .linear_engine import WEIGHT_PORTS, LinearEngine
from .perf_counter import PerfCounter
from .regmap import ERROR_CODES, LIN_ADDR_SHIFT, accelerator_regmap
from .ssm_engine import SSMEngine
from .tree_verifier import TreeVerifier

__all__ = ["Accelerator", "ERROR", "PASS_KINDS", "layer_pass_config"]

#: ``STATUS.ERROR_CODE`` values by name (:data:`hw.regmap.ERROR_CODES`).
ERROR = {e.name: e.value for e in ERROR_CODES}

#: The layer loops the scheduler runs: a target tree pass, the target's commit (replay of
#: the accepted path), one draft token, the draft's commit.
PASS_KINDS = ("tree", "commit", "draft", "draft_commit")

COUNTER_BITS = 48
#: Low part of each split event counter (:class:`hw.perf_counter.PerfCounter`).
COUNTER_LOW_BITS = 12


def layer_pass_config(config):
    """``config`` as :class:`Accelerator` builds it: ``ssm.head_groups`` 1. Its host runs a
    layer's SSM pass as one descriptor; head groups are the decoder core's programs'
    (:mod:`hw.step_program`). ``gen.emit.blocks`` builds the top's SSM engine from it."""
    if config.ssm.head_groups == 1:
        return config
    return config.replace(ssm=replace(config.ssm, head_groups=1))


class Accelerator(wiring.Component):
    """The accelerator: memory-fed linear and SSM engines, tree verifier, scheduler.

    Parameters
    ----------
    config : golden.config.Config
        A preset (``golden.config.preset``) or a custom config. ``tree.max_nodes``
        must be ≥ 2; ``linear.contract`` must be ``"dspfp32"`` (the linear engine's
        :class:`hw.dsp_linear_unit.DSPLinearUnit`); the SSM config must suit
        :class:`hw.tree_ssm.TreeSSMUnit`.
    addr_width : int
        Byte-address width of every AXI4 port (default 40: the Versal NoC's; the
        benches use a smaller memory).

    Attributes
    ----------
    s_axi : In(AXI4LiteSignature(addr_width=regmap.addr_width))
        Control and status (:func:`hw.regmap.accelerator_regmap`, ``docs/regmap.md``).
    m_axi_lin_w0 … m_axi_lin_w(4P − 1) : Out(AXI4 read), domain ``mem``
        The weight planes of the linear engine's ``P`` weight ports
        (:func:`golden.weight_planes.engine_weight_ports`: 1 on ``sim`` and VCK190, 6
        on VHK158): ``w(4p)`` port ``p``'s nibble plane, ``w(4p+1)``–``w(4p+3)`` its
        residue slices (:class:`hw.weight_stream.WeightStream`; a draft job reads the
        nibble ports alone).
    m_axi_lin_x : Out(AXI4 read), domain ``mem``
        Activations (:data:`hw.linear_engine.X_PORT_BITS` bits).
    m_axi_lin_y : Out(AXI4 write), domain ``mem``
        Result records (:attr:`hw.linear_engine.LinearEngine.y_record_bytes` each).
    m_axi_ssm_in, m_axi_ssm_st_rd0 … m_axi_ssm_st_rd(S − 1) : Out(AXI4 read), domain ``mem``
    m_axi_ssm_st_wr0 … m_axi_ssm_st_wr(S − 1), m_axi_ssm_y : Out(AXI4 write), domain ``mem``
        The SSM engine's memory ports (:class:`hw.ssm_engine.SSMEngine`): parameters
        and node records in, the committed state in, one node's new state out,
        every node's ``y`` out; the state through ``S = ssm.state_ports`` ports each
        way (1 on ``sim`` and VCK190, 16 on VHK158), port ``p`` on stripe ``p``. ``mem_clk``/``mem_rst`` clock them
        (``board.memory_clock_mhz``).
    irq : Out(1)
        ``CTRL.IRQ_EN`` and (``STATUS.DONE`` or ``STATUS.ERROR``).

    Notes
    -----
    Addresses, per layer ``l`` (``docs/memory-map.md``), with the strides of
    :func:`golden.memory_map.ssm_engine_layout`: parameters at
    ``MEM_WEIGHTS_BASE + l·params_stride``; buffer ``b`` of
    :data:`golden.memory_map.SSM_BUFFERS` at ``MEM_IO_BASE + l·io_layer_stride +
    b·buffer_stride``; slot ``s`` of :data:`golden.memory_map.SSM_SLOTS` at
    ``MEM_STATE_BASE + l·state_layer_stride + s·slot_stride``.

    A target step (``MODE.MODE = TARGET``, ``CTRL.START``):

    1. The tree is read from ``TREE_PARENT`` into the ``TreeVerifier`` (one node a
       cycle); its FIFO schedule becomes the engine's node table (one entry a cycle).
    2. One tree pass per layer, ``DIM_MODEL.N_LAYER`` layers: every node's ``y``
       into ``target.y``, from the committed slot ``target<STATE_BANK.TARGET>``; no
       state is written. Then ``STATUS.WAIT_MATCH``.
    3. After ``CTRL.MATCH_GO`` the match bits (``TREE_MATCH``) go to the verifier,
       one per cycle; the accepted path lands in ``TREE_RESULT`` / ``TREE_PATH``.
    4. Commit: the path, as a chain, becomes the node table; one commit pass per
       layer replays the path's records from the committed slot (SpecMamba's
       replay backtracking) and writes the last node's state into the other
       bank. ``STATUS.DONE``; the host then flips ``STATE_BANK.TARGET``.

    ``MODE = DRAFT``: ``START`` runs one draft token (a one-node pass per layer)
    from the draft's committed slot (the first token after a draft commit or
    ``ROLLBACK``) or from the scratch slot the previous token wrote, into the
    other scratch slot; token ``t`` reads record ``t`` of ``draft.in`` and writes
    ``y`` ``t`` of ``draft.y``. ``CTRL.ROLLBACK`` drops the draft tokens (the next
    starts from the committed slot: no copy). ``CTRL.DRAFT_COMMIT`` replays the
    first ``DRAFT_ACCEPT.COUNT`` draft records into the draft's other bank.

    ``CTRL.ABORT`` stops a step at the next layer boundary (a pass in flight
    finishes) and drains the tree verifier. The first error since the last
    clear sets ``STATUS.ERROR`` and ``ERROR_CODE`` (:data:`ERROR`).

    Linear jobs: ``LIN_CMD``, ``LIN_STEPS`` and the ``LIN_*`` addresses, then
    ``LIN_CTRL.GO``, queue one job (one waiting job at most); the engine takes it
    when it has room (it holds several, :class:`hw.linear_engine.LinearEngine`) and
    runs it from memory, independently of the SSM path. ``LIN_STATUS.JOBS_DONE``
    counts jobs whose results memory has acknowledged.
    """

    def __init__(self, *, config, addr_width=40):
        if not isinstance(config, Config):
            raise TypeError(f"Accelerator.config must be a golden.config.Config, not {config!r}")
        if config.tree.max_nodes < 2:
            raise ValueError(f"Accelerator.config.tree.max_nodes must be >= 2 (the root and one "
                             f"draft node), not {config.tree.max_nodes!r}")
        self._aw = check_int("Accelerator", "addr_width", addr_width, min=ALIGN.bit_length(),
                             max=64)
        if config.linear.contract != "dspfp32":
            raise ValueError(f"Accelerator.config.linear.contract must be 'dspfp32' (the "
                             f"memory-fed linear engine's DSPLinearUnit; the 'exact' "
                             f"LinearUnit is a block of its own), not "
                             f"{config.linear.contract!r}")
        config = layer_pass_config(config)
        self._config = config
        self._regmap = accelerator_regmap(config)
        self._layout = ssm_engine_layout(config)
        # Built once and elaborated as they are (they hold their masters, which hold
        # their own sub-blocks).
        # The host hands the linear engine a job's plane addresses through registers: the
        # nibble and residue planes. There is no register for a draft plane
        # (linear.draft_plane, the decoder core's), so this engine reads the nibble plane.
        self._lin = LinearEngine(config=config.replace(
            linear=replace(config.linear, draft_plane=False)), addr_width=self._aw)
        self._engine = SSMEngine(config=config, addr_width=self._aw)
        self._tv = template(TreeVerifier.from_config(config))
        eng, lin = self._engine.signature.members, self._lin.signature.members
        self._w_ports = WEIGHT_PORTS * self._lin.weight_ports
        super().__init__({
            "s_axi": In(AXI4LiteSignature(addr_width=self._regmap.addr_width)),
            **{f"m_axi_lin_w{j}": Out(self._lin.m_axi_w[j].signature)
               for j in range(self._w_ports)},
            "m_axi_lin_x": Out(lin["m_axi_x"].signature),
            "m_axi_lin_y": Out(lin["m_axi_y"].signature),
            **{f"m_axi_ssm_{port}": Out(eng[f"m_axi_{port}"].signature)
               for port in self._ssm_ports()},
            "irq": Out(1),
        })

    def _ssm_ports(self):
        """The SSM engine's AXI ports, by their names there without ``m_axi_``."""
        S = self._engine.state_ports
        return ("in", *(f"st_rd{q}" for q in range(S)), *(f"st_wr{q}" for q in range(S)), "y")

    @classmethod
    def from_config(cls, config, **kw):
        """The accelerator of a ``golden.config.Config`` (every block of it built from it)."""
        return cls(config=config, **kw)

    # -- parameters and timing ------------------------------------------------------------

    config = property(lambda self: self._config)
    addr_width = property(lambda self: self._aw)
    #: The SSM engine's region sizes and strides (:func:`golden.memory_map.ssm_engine_layout`).
    layout = property(lambda self: self._layout)

    regmap = property(lambda self: self._regmap)
    #: The linear engine (its record sizes and port widths, for a host or bench).
    linear_engine = property(lambda self: self._lin)
    #: The SSM engine's AXI data widths (:attr:`hw.ssm_engine.SSMEngine.port_widths`).
    ssm_port_widths = property(lambda self: self._engine.port_widths)
    #: The linear engine's AXI data widths (:attr:`hw.linear_engine.LinearEngine.port_widths`).
    linear_port_widths = property(lambda self: self._lin.port_widths)

    @property
    def module_name(self):
        """Verilog name encoding the config, e.g.
        ``Accelerator_sim_r2c4q3k16_h2p2n8l4_t64d16_p222`` (``p``: the FP multiply,
        FP add and PE rounding stages of ``config.pipeline``; ``_a<n>`` for an
        address width other than 40)."""
        c = self._config
        s, t, lin, p = c.ssm, c.tree, c.linear, c.pipeline
        arr = f"d{lin.rows}x{lin.cols}t{lin.max_tokens}k{lin.max_k}"
        return (f"Accelerator_{c.name}_{arr}"
                f"_h{s.nheads}p{s.headdim}n{s.d_state}l{s.lanes}_t{t.max_nodes}d{t.fifo_depth}"
                f"_p{p.fp_mul_stages}{p.fp_add_stages}{p.pe_round_stages}"
                + ("" if self._aw == 40 else f"_a{self._aw}"))

    # -- logic ----------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        lay = self._layout
        aw = self._aw
        max_nodes = cfg.tree.max_nodes
        depth = cfg.tree.fifo_depth
        nb = index_width(max_nodes)

        rf = AXI4LiteRegisterFile(regmap=self._regmap)
        m.submodules.regs = rf
        wiring.connect(m, wiring.flipped(self.s_axi), rf.s_axi)

        # Two clock domains (sync and mem): plain submodules, not hierarchy.submodule.
        lin = self._lin
        m.submodules.linear = lin
        for j in range(self._w_ports):
            wiring.connect(m, wiring.flipped(getattr(self, f"m_axi_lin_w{j}")), lin.m_axi_w[j])
        wiring.connect(m, wiring.flipped(self.m_axi_lin_x), lin.m_axi_x)
        wiring.connect(m, wiring.flipped(self.m_axi_lin_y), lin.m_axi_y)
        tv = TreeVerifier.from_config(cfg)
        m.submodules.tree = tv
        eng = self._engine
        m.submodules.ssm = eng
        for port in self._ssm_ports():
            wiring.connect(m, wiring.flipped(getattr(self, f"m_axi_ssm_{port}")),
                           getattr(eng, f"m_axi_{port}"))
        m.d.comb += tv.passes.eq(1)

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

        # ---- linear engine: jobs from registers, data in memory ---------------------------
        lin_pending = Signal()
        lin_desc = Signal.like(lin.desc.payload)
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
        m.d.comb += [lin.desc.valid.eq(lin_pending), lin.desc.payload.eq(lin_desc)]
        with m.If(lin.desc.valid & lin.desc.ready):
            m.d.sync += lin_pending.eq(0)

        def lin_addr(name):
            lo, hi = (getattr(rf, f"lin_{name}_{half}_addr") for half in ("lo", "hi"))
            return Cat(C(0, LIN_ADDR_SHIFT), lo, hi)[:aw]

        with m.If(rf.lin_ctrl_go):
            with m.If(lin_bad):
                fail("LINEAR_CMD")
            with m.Else():
                m.d.sync += [lin_pending.eq(1), lin_desc.mode.eq(rf.lin_cmd_mode),
                             lin_desc.steps.eq(rf.lin_steps_steps),
                             lin_desc.n_rows.eq(rf.lin_cmd_n_rows),
                             lin_desc.n_tokens.eq(rf.lin_cmd_n_tokens),
                             lin_desc.k.eq(rf.lin_cmd_scale),
                             lin_desc.nibble_addr.eq(lin_addr("w_nibble")),
                             lin_desc.residue_addr.eq(lin_addr("w_residue")),
                             lin_desc.x_addr.eq(lin_addr("x")),
                             lin_desc.x_stride.eq(
                                 Cat(C(0, LIN_ADDR_SHIFT), rf.lin_x_stride_stride)[:aw]),
                             lin_desc.y_addr.eq(lin_addr("y"))]
        # A memory error of the linear engine (sticky there) is reported once.
        lin_err_seen = Signal()
        m.d.sync += lin_err_seen.eq(lin.error)
        with m.If(lin.error & ~lin_err_seen):
            fail("MEMORY")
        m.d.comb += [rf.lin_status_pending.eq(lin_pending), rf.lin_status_busy.eq(lin.busy),
                     rf.lin_status_jobs_done.eq(lin.jobs_done[:16])]
        lin_fire = lin.op_fire
        lin_mode = lin.op_draft

        # ---- the scheduler ---------------------------------------------------------------
        count = Signal(range(max_nodes + 1))      # nodes of the tree being verified
        # count - 1 (modulo its width), kept in a register so that `i == count - 1`
        # is an equality of two registers, not a subtract then compare.
        count_m1 = Signal(len(count), init=(1 << len(count)) - 1)
        i = Signal(range(max_nodes + 1))          # node index while loading / matching
        prev_parent = Signal(nb)
        order_bad = Signal()
        path_len = Signal(range(max_nodes + 1))
        path_m1 = Signal(len(path_len))
        k = Signal(range(max_nodes + 1))          # position on the committed chain
        aborting = Signal()   # (not `abort`: a C++ word, which Verilator refuses as a member)
        target = Signal()
        step_cycles = Signal(COUNTER_BITS)
        res_tokens = Signal(nb + 1)
        res_last = Signal(nb)
        # One-hot, so that a test of the kind is one bit (no compare with 0).
        kind = Signal(len(PASS_KINDS))
        KIND = {name: 1 << n for n, name in enumerate(PASS_KINDS)}

        def kind_is(name):
            return kind[PASS_KINDS.index(name)]
        draft_t = Signal(range(max_nodes + 1))    # draft tokens since the last commit/rollback
        draft_y = Signal(aw)                      # byte offset of draft token t's y

        path_mem = Memory(shape=nb, depth=max_nodes, init=[])
        m.submodules.path = path_mem
        path_w = path_mem.write_port()
        path_rd = path_mem.read_port(domain="comb")
        path_host = path_mem.read_port(domain="comb")
        m.d.comb += [path_host.addr.eq(rf.tree_path_index[:index_width(max_nodes)]),
                     rf.tree_path_node.eq(Mux(rf.tree_path_index < path_len, path_host.data, 0)),
                     path_rd.addr.eq(k),
                     rf.tree_result_tokens.eq(res_tokens), rf.tree_result_last_node.eq(res_last),
                     rf.status_draft_tokens.eq(draft_t)]

        m.d.comb += [rf.tree_parent_addr.eq(i), rf.tree_match_addr.eq(i)]
        with m.If(rf.ctrl_abort):
            m.d.sync += aborting.eq(1)
        # MATCH_GO may come while the last tree pass still runs: keep it.
        match_req = Signal()
        with m.If(rf.ctrl_match_go):
            m.d.sync += match_req.eq(1)

        # The scheduler's states, one-hot (reset: IDLE). Verilator's -Wall rejects
        # the comparisons with 0 and the incomplete case statements of a binary
        # encoded m.FSM, as in hw.tree_verifier.
        names = ("IDLE", "START_CHECK", "COMMIT_CHECK", "LOAD", "TABLE", "LAYERS_START",
                 "LAYER_DESC", "LAYER_ISSUE", "LAYER_WAIT", "WAIT_MATCH", "MATCH", "PATH",
                 "CHAIN_TABLE", "FLUSH")
        state = OneHot(names, init="IDLE", prefix="st_")

        def goto(name):
            state.goto(m, name)

        # The checks of the DIM_* and TREE_DESC registers, registered (logic levels,
        # docs/estimate.md). No behaviour changes: START is a write of its own, and
        # two AXI4-Lite writes commit at least three cycles apart (hw.axi_lite:
        # BVALID blocks AWREADY), so the checks have settled on the values of every
        # earlier write by the cycle START reaches the scheduler.
        H, P, N = cfg.ssm.state_shape
        dims_bad = Signal()
        tree_bad = Signal()
        accept_bad = Signal()
        draft_full = Signal()                     # max_nodes draft tokens run: no record left
        node_count = rf.tree_desc_node_count
        accept = rf.draft_accept_count
        n_layer = rf.dim_model_n_layer
        m.d.sync += [
            dims_bad.eq(~rf.dim_ssm_nheads.any() | (rf.dim_ssm_nheads > H)
                        | ~rf.dim_ssm_headdim.any() | (rf.dim_ssm_headdim > P)
                        | ~rf.dim_ssm_d_state.any() | (rf.dim_ssm_d_state > N)
                        | ~n_layer.any()),
            tree_bad.eq(~node_count.any() | (node_count > max_nodes)),
            accept_bad.eq(~accept.any() | (accept > draft_t)),
            draft_full.eq(draft_t == max_nodes),
        ]

        # ---- addresses: bases from the registers, a running sum of the strides per layer
        def base(kind_name):
            lo = getattr(rf, f"mem_{kind_name}_base_lo_addr")
            hi = getattr(rf, f"mem_{kind_name}_base_hi_addr")
            return Cat(C(0, ALIGN.bit_length() - 1), lo, hi)[:aw]
        layer = Signal(len(n_layer))
        layer_m1 = Signal(len(n_layer))           # N_LAYER - 1, registered at the loop's start
        pa = Signal(aw)                           # this layer's weights.ssm_params entry
        sa = Signal(aw)                           # this layer's state.ssm slot 0
        ia = Signal(aw)                           # this layer's io.ssm buffer 0
        # Offsets within a layer's entries, fixed for the whole loop (registered at its start).
        in_off, out_off, rec_off, y_off = (Signal(aw, name=f"{n}_off")
                                           for n in ("in", "out", "rec", "y"))
        nodes = Signal(range(1, max_nodes + 1))
        out_node = Signal(nb)
        out_en = Signal()
        y_en = Signal()

        def slot(name):
            return SSM_SLOTS.index(name) * lay.slot_stride

        def buffer(name):
            return SSM_BUFFERS.index(name) * lay.buffer_stride

        def start_layers(kind_name, *, n, last):
            """Enter the layer loop through LAYERS_START: ``n`` nodes a pass (``last`` is
            ``n − 1``). Only the kind and the node counts are set here, so the many
            registers the loop starts with load on LAYERS_START's one-hot bit alone
            (logic levels)."""
            m.d.sync += [kind.eq(KIND[kind_name]), nodes.eq(n), out_node.eq(last)]
            goto("LAYERS_START")

        done = Signal()
        m.d.comb += rf.status_done_set.eq(done)
        busy = Signal()
        m.d.comb += [busy.eq(~state["IDLE"]), rf.status_busy.eq(busy),
                     rf.status_wait_match.eq(state["WAIT_MATCH"])]
        tbl = eng.tbl_entry
        desc = eng.desc.payload
        # ---- the scheduler's sequence --------------------------------------------------
        # IDLE only notes which command came; START_CHECK and COMMIT_CHECK decide on the
        # registered checks a cycle later, so no register's enable sees the whole chain
        # of conditions (logic levels).
        with m.If(state["IDLE"]):
            m.d.sync += [aborting.eq(0), match_req.eq(0)]
            with m.If(rf.ctrl_start):
                goto("START_CHECK")
            with m.Elif(rf.ctrl_rollback):
                m.d.sync += [draft_t.eq(0), draft_y.eq(0)]
                m.d.comb += done.eq(1)
            with m.Elif(rf.ctrl_draft_commit):
                goto("COMMIT_CHECK")
        with m.If(state["START_CHECK"]):
            with m.If(dims_bad):
                fail("DIMENSIONS")
                goto("IDLE")
            with m.Elif(rf.mode_mode):
                with m.If(tree_bad):
                    fail("TREE_SIZE")
                    goto("IDLE")
                with m.Else():
                    m.d.sync += [target.eq(1), count.eq(node_count),
                                 count_m1.eq(node_count - 1), i.eq(0),
                                 order_bad.eq(0), step_cycles.eq(0)]
                    goto("LOAD")
            with m.Elif(draft_full):
                fail("DRAFT_ACCEPT")
                goto("IDLE")
            with m.Else():
                # One draft token (its one-node table is written in LAYERS_START).
                m.d.sync += target.eq(0)
                start_layers("draft", n=1, last=0)
        with m.If(state["COMMIT_CHECK"]):
            with m.If(dims_bad):
                fail("DIMENSIONS")
                goto("IDLE")
            with m.Elif(accept_bad):
                fail("DRAFT_ACCEPT")
                goto("IDLE")
            with m.Else():
                m.d.sync += [target.eq(0), path_len.eq(accept), path_m1.eq(accept - 1),
                             k.eq(0), kind.eq(KIND["draft_commit"])]
                goto("CHAIN_TABLE")
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
                    goto("TABLE")
        with m.If(state["TABLE"]):
            # The verifier's FIFO schedule, one beat a cycle, into the engine's node table.
            beat = tv.schedule.payload
            with m.If(tv.error):
                with m.If(order_bad):
                    fail("TREE_ORDER")
                with m.Else():
                    fail("TREE_OVERFLOW")
                goto("FLUSH")
            with m.Elif(aborting):
                goto("FLUSH")
            with m.Elif(tv.schedule.valid):
                m.d.comb += [tv.schedule.ready.eq(1),
                             eng.tbl_we.eq(beat.node_valid), eng.tbl_node.eq(beat.node),
                             eng.tbl_src.eq(beat.node), tbl.root.eq(beat.root),
                             tbl.parent_slot.eq(beat.parent_slot),
                             tbl.write_slot.eq(beat.write_slot)]
                with m.If(beat.last):
                    start_layers("tree", n=count, last=0)
        with m.If(state["LAYERS_START"]):
            tb, db = rf.state_bank_target, rf.state_bank_draft
            odd = draft_t[0]
            m.d.sync += [layer.eq(0), layer_m1.eq(n_layer - 1),
                         pa.eq(base("weights")), sa.eq(base("state")), ia.eq(base("io")),
                         out_en.eq(~kind_is("tree")), y_en.eq(kind_is("tree") | kind_is("draft"))]
            # (state in, state out, records, y): the slot and buffer offsets of each kind
            with m.If(kind_is("tree")):
                m.d.sync += [in_off.eq(Mux(tb, slot("target1"), slot("target0"))),
                             out_off.eq(0), rec_off.eq(buffer("target.in")),
                             y_off.eq(buffer("target.y"))]
            with m.If(kind_is("commit")):
                m.d.sync += [in_off.eq(Mux(tb, slot("target1"), slot("target0"))),
                             out_off.eq(Mux(tb, slot("target0"), slot("target1"))),
                             rec_off.eq(buffer("target.in")), y_off.eq(0)]
            with m.If(kind_is("draft")):
                # Token t reads the committed bank (t = 0) or the scratch slot token t−1
                # wrote, writes scratch slot t mod 2, and reads record t (its one-node table).
                m.d.comb += [eng.tbl_we.eq(1), eng.tbl_node.eq(0), eng.tbl_src.eq(draft_t),
                             tbl.root.eq(1)]
                m.d.sync += [in_off.eq(Mux(draft_t.any(),
                                           Mux(odd, slot("scratch0"), slot("scratch1")),
                                           Mux(db, slot("draft1"), slot("draft0")))),
                             out_off.eq(Mux(odd, slot("scratch1"), slot("scratch0"))),
                             rec_off.eq(buffer("draft.in")),
                             y_off.eq(buffer("draft.y") + draft_y)]
            with m.If(kind_is("draft_commit")):
                m.d.sync += [in_off.eq(Mux(db, slot("draft1"), slot("draft0"))),
                             out_off.eq(Mux(db, slot("draft0"), slot("draft1"))),
                             rec_off.eq(buffer("draft.in")), y_off.eq(0)]
            goto("LAYER_DESC")
        with m.If(state["LAYER_DESC"]):
            # This layer's descriptor: four additions of registers, one cycle.
            m.d.sync += [desc.nodes.eq(nodes), desc.out_node.eq(out_node),
                         desc.out_en.eq(out_en), desc.y_en.eq(y_en), desc.load_params.eq(1),
                         desc.params_addr.eq(pa), desc.input_addr.eq(ia + rec_off),
                         desc.state_in_addr.eq(sa + in_off),
                         desc.state_out_addr.eq(Mux(out_en, sa + out_off, 0)),
                         desc.y_addr.eq(Mux(y_en, ia + y_off, 0))]
            goto("LAYER_ISSUE")
        with m.If(state["LAYER_ISSUE"]):
            m.d.comb += eng.desc.valid.eq(1)
            with m.If(eng.desc.ready):
                goto("LAYER_WAIT")
        with m.If(state["LAYER_WAIT"]):
            # The engine is busy from the cycle after it took the descriptor.
            with m.If(~eng.busy):
                m.d.sync += [layer.eq(layer + 1), pa.eq(pa + lay.params_stride),
                             sa.eq(sa + lay.state_layer_stride), ia.eq(ia + lay.io_layer_stride)]
                with m.If(eng.error):
                    fail("MEMORY")
                    goto("FLUSH")
                with m.Elif(layer != layer_m1):
                    with m.If(aborting):
                        goto("FLUSH")
                    with m.Else():
                        goto("LAYER_DESC")
                with m.Elif(kind_is("tree")):
                    goto("WAIT_MATCH")
                with m.Else():
                    m.d.comb += done.eq(1)
                    goto("IDLE")
                    with m.If(kind_is("draft")):
                        m.d.sync += [draft_t.eq(draft_t + 1), draft_y.eq(draft_y + lay.y_bytes)]
                    with m.If(kind_is("draft_commit")):
                        m.d.sync += [draft_t.eq(0), draft_y.eq(0)]
        with m.If(state["WAIT_MATCH"]):
            with m.If(aborting):
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
                    m.d.sync += [path_len.eq(tv.path.payload.tokens),
                                 path_m1.eq(tv.path.payload.tokens - 1), k.eq(0),
                                 res_tokens.eq(tv.path.payload.tokens),
                                 res_last.eq(tv.path.payload.node), kind.eq(KIND["commit"])]
                    goto("CHAIN_TABLE")
        with m.If(state["CHAIN_TABLE"]):
            # The accepted path (or the accepted draft tokens) as a chain: node k reads
            # the ring slot node k−1 wrote (the committed state for k = 0), writes slot
            # k mod fifo_depth, and replays record path[k] (draft: record k).
            wslot = Signal(index_width(depth))
            pslot = Signal(index_width(depth))
            m.d.comb += [eng.tbl_we.eq(1), eng.tbl_node.eq(k),
                         eng.tbl_src.eq(Mux(kind_is("commit"), path_rd.data, k)),
                         tbl.root.eq(~k.any()), tbl.parent_slot.eq(pslot),
                         tbl.write_slot.eq(Mux(k.any(), wslot, 0))]
            m.d.sync += [k.eq(k + 1), pslot.eq(Mux(k.any(), wslot, 0)),
                         wslot.eq(Mux(k.any(), Mux(wslot == depth - 1, 0, wslot + 1),
                                      1 % depth))]
            with m.If(k == path_m1):
                with m.If(kind_is("commit")):
                    start_layers("commit", n=path_len, last=path_m1)
                with m.Else():
                    start_layers("draft_commit", n=path_len, last=path_m1)
        with m.If(state["FLUSH"]):
            # Drain the tree verifier (after an error or ABORT): take every schedule
            # beat, feed zero match bits, take the path; wait for the engine's pass.
            m.d.comb += [tv.schedule.ready.eq(1), tv.path.ready.eq(1),
                         tv.match.valid.eq(target & (i < count)), tv.match.payload.match.eq(0),
                         tv.match.payload.last.eq(i == count_m1)]
            with m.If(tv.match.valid & tv.match.ready):
                m.d.sync += i.eq(i + 1)
            with m.If(~tv.busy & ~eng.busy):
                goto("IDLE")

        # ---- performance counters --------------------------------------------------------
        snap = rf.perf_ctrl_snapshot
        clear = rf.perf_ctrl_clear
        lin_stall_base = Signal(COUNTER_BITS)
        with m.If(clear):
            m.d.sync += lin_stall_base.eq(lin.stall_cycles)
        with m.If(busy & target):
            m.d.sync += step_cycles.eq(step_cycles + 1)
        steps_inc = done & target & kind_is("commit")
        events = {
            "perf_cycles": 1,
            "perf_draft_cycles": lin_fire & lin_mode,
            "perf_verify_cycles": busy & target,
            "perf_tokens_accepted": Mux(steps_inc, path_len, 0),
            "perf_steps": steps_inc,
            "perf_linear_busy": lin_fire,
            "perf_ssm_busy": eng.busy,
            "perf_overlap": lin_fire & eng.busy,
            "perf_state_cycles": eng.busy & (kind_is("commit")
                                             | kind_is("draft_commit")),
            "perf_nodes": (state["TABLE"] & tv.schedule.valid & tv.schedule.ready
                           & tv.schedule.payload.node_valid),
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

