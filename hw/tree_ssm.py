"""``TreeSSMUnit``: SpecMamba's tile-streamed FIFO tree verification on the SSM datapath.

SpecMamba (arXiv 2509.19873, "FIFO-based tree verification with tiling") verifies a
breadth-first flattened draft tree tile by tile: the committed state streams in
once, and for every tile the nodes are processed in BFS order, each node's tile
computed from its parent's tile and held in a ring slot until its last child has
read it. A ring slot therefore holds one *tile* of a live node, not a whole state
(``docs/tree.md``, golden model :func:`golden.speculative.evaluate_tree`).

This unit is that loop on the arithmetic of :class:`hw.ssm_unit.SSMUnit`
(:class:`hw.ssm_unit.SSMDatapath`: the same operations in the same order, so every
node's ``y`` and state are :func:`golden.mamba2.ssm_step_hw` of its parent's state,
bit for bit). The state never lives on chip: the committed tiles arrive on
``st_in`` (from memory, :class:`hw.axi_master.AXI4ReadMaster`), and the tiles of
one chosen node (``out_node``: the accepted path's last node of a commit pass, or
the draft's next state) leave on ``st_out`` (to memory).

A pass, for ``n`` nodes loaded into the node banks:

1. prologue: ``delta`` and ``dA`` of every node and head (``n·nheads`` issues);
2. sweep: for each tile (``rows_per_tile`` state rows, :attr:`rows_per_tile`), for
   each node ``i`` in BFS order, for each row and group of ``lanes`` columns (or, with
   ``lanes = Q·d_state``, each issue of ``Q`` rows of a head): read the parent's tile
   from its ring slot (node ``i``'s table entry), or from ``st_in`` for a root, and
   write ``h'`` into node ``i``'s slot.

A node's first read of a tile comes at least :attr:`gap` enabled cycles after its
predecessor's (its parent's write-back of that tile is then done), so a chain runs
at one tile per cycle when :attr:`tile_issues` ``>= gap``, as :attr:`rows_per_tile` is
chosen.
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int
from specgen.hw.bits import eq_const, index_width
from specgen.hw.fp_arith import add_const, delay_line
from specgen.hw.fp_datapath import ge_const
from specgen.hw.hierarchy import submodule
from specgen.hw.ssm_unit import (
    SEL_A,
    SEL_B,
    SEL_C,
    SEL_D,
    SEL_DT,
    SEL_DT_BIAS,
    SEL_X,
    SSMDatapath,
    StateBank,
    _Counter,
    beat_word,
)

__all__ = ["TreeSSMUnit", "pass_layout", "table_layout"]


def pass_layout(max_nodes):
    """One pass command: ``nodes`` (1 … ``max_nodes``), and ``out_en``/``out_node``:
    send node ``out_node``'s new state on ``st_out``."""
    return data.StructLayout({"nodes": range(1, max_nodes + 1),
                              "out_node": index_width(max_nodes), "out_en": 1})


def table_layout(fifo_depth):
    """One node-table entry: ``root`` (reads ``st_in``), ``parent_slot``, ``write_slot``."""
    sb = index_width(fifo_depth)
    return data.StructLayout({"root": 1, "parent_slot": sb, "write_slot": sb})


class TreeSSMUnit(SSMDatapath):
    """The SSM unit in SpecMamba's tile-streamed FIFO tree-verification order.

    Parameters
    ----------
    cfg : golden.mamba2.SSMConfig
        As :class:`hw.ssm_unit.SSMDatapath` (``state_format="fp32"``); ``lanes`` up to
        ``d_state``, or ``Q·d_state`` to sweep ``Q`` rows of a head an issue.
    max_nodes : int
        Most nodes per pass (node banks), 1 … 1024.
    fifo_depth : int
        Ring slots, 1 … 256; each holds one tile (:attr:`rows_per_tile` rows) of a
        live node.
    mul_stages, add_stages : int
        As :class:`hw.ssm_unit.SSMUnit`.

    Attributes
    ----------
    wr_en, wr_sel, wr_addr, wr_data : In
        Input write port, one beat of ``input_words`` words per cycle, as
        :class:`hw.ssm_unit.SSMUnit`'s (``wr_addr`` counts beats), into node
        ``wr_node``'s bank for ``SEL_B``/``SEL_C``/``SEL_X``/``SEL_DT``, or the layer
        parameters for ``SEL_A``/``SEL_DT_BIAS``/``SEL_D``. Write only while
        :attr:`busy` is low.
    wr_node : In(index_width(max_nodes))
    tbl_we, tbl_node, tbl_entry : In
        Node-table write port: entry ``tbl_node`` := ``tbl_entry``
        (:func:`table_layout`), the FIFO schedule of
        :func:`golden.tree.fifo_schedule` (``root`` for node 0, ``parent_slot``,
        ``write_slot``); :class:`hw.tree_verifier.TreeVerifier`'s node beats carry
        exactly these fields. Write only while :attr:`busy` is low.
    cmd : In(stream.Signature(pass_layout(max_nodes)))
        Starts a pass; taken (``ready``) when :attr:`busy` is low.
    st_in : In(stream.Signature(32·lanes))
        The committed state's words in the tile order (:func:`golden.memory_map.tile_order`:
        tile ``k`` of row ``r`` is beat ``r·⌈N/lanes⌉ + k``, lane ``i`` in bits ``32i…``;
        with ``Q`` rows an issue, beat ``a`` holds rows ``a·Q …``, row ``a·Q + j``'s
        column ``n`` in lane ``j·N + n``), read once, by the root node; a beat that is
        not valid stalls the root's issue only.
    st_out : Out(stream.Signature(32·lanes))
        With ``out_en``: node ``out_node``'s new tiles in the same order (lanes past
        column ``N − 1`` of a partial last tile are unspecified); from a FIFO whose
        fill drops the pipeline's clock enable, so holding ``ready`` low stalls the
        pass, never loses a tile.
    y : Out(stream.Signature(32·Q))
        ``y[h, p]`` of every node: for each tile, for each node in order, its
        :attr:`rows_per_tile` rows, ``Q`` a beat (the first in the low word); held ``y``
        stalls the pass (registered enable).
    busy : Out(1)
        From the cycle after ``cmd`` is taken until the pass's last ``y`` and
        ``st_out`` beat have left.

    Notes
    -----
    Cycles of a pass without stalls: ``n·nheads`` (prologue issue) +
    :attr:`prologue_latency` + ``tiles · Σ_nodes max(tile_issues, gap)``
    + :attr:`latency`, with ``tiles = nheads·P / rows_per_tile``
    (:meth:`pass_cycles`).
    """

    #: Depth of the FIFO behind ``st_out`` (as ``y``'s, :attr:`SSMDatapath.Y_FIFO_DEPTH`).
    ST_FIFO_DEPTH = SSMDatapath.Y_FIFO_DEPTH

    def __init__(self, *, cfg, max_nodes, fifo_depth, mul_stages=2, add_stages=2):
        self._max_nodes = check_int("TreeSSMUnit", "max_nodes", max_nodes, min=1, max=1024)
        self._depth = check_int("TreeSSMUnit", "fifo_depth", fifo_depth, min=1, max=256)
        nb = index_width(self._max_nodes)

        def members(c):
            H, P, N = c.state_shape
            W = c.input_words
            return {
                "wr_en": In(1), "wr_sel": In(3), "wr_node": In(nb),
                "wr_addr": In(index_width(max(H * P, N, H, 2) // W)),
                "wr_data": In(32 * W),
                "tbl_we": In(1), "tbl_node": In(nb), "tbl_entry": In(table_layout(self._depth)),
                "cmd": In(stream.Signature(pass_layout(self._max_nodes))),
                "st_in": In(stream.Signature(32 * c.lanes)),
                "st_out": Out(stream.Signature(32 * c.lanes)),
                "y": Out(stream.Signature(32 * c.rows_per_word)),
                "busy": Out(1),
            }

        super().__init__(cfg=cfg, mul_stages=mul_stages, add_stages=add_stages, members=members)
        H, P, _N = cfg.state_shape
        Q, K = cfg.rows_per_word, cfg.groups_per_row
        issues = H * P // Q                  # row issues of a state (Q rows each)
        # The smallest tile (in whole issues of Q rows, dividing the state) whose issue
        # covers the read-to-write-back distance: then a child never waits for its parent.
        need = -(-self.gap // K)
        self._rows = Q * next((r for r in range(need, issues + 1) if issues % r == 0), issues)

    @classmethod
    def from_config(cls, config):
        """The unit of a :class:`golden.config.Config`: its ``ssm`` (one pass's heads,
        :attr:`golden.mamba2.SSMConfig.pass_config`), ``pipeline`` and ``tree``
        (``max_nodes``, ``fifo_depth``)."""
        return cls(cfg=config.ssm.pass_config, max_nodes=config.tree.max_nodes,
                   fifo_depth=config.tree.fifo_depth, mul_stages=config.pipeline.fp_mul_stages,
                   add_stages=config.pipeline.fp_add_stages)

    max_nodes = property(lambda self: self._max_nodes)
    fifo_depth = property(lambda self: self._depth)

    @property
    def gap(self):
        """Least enabled cycles between the first issues of consecutive nodes of a tile:
        :attr:`emu_latency` ``+ 1`` (a read sees a write-back of the cycle before)."""
        return self.emu_latency + 1

    @property
    def rows_per_tile(self):
        """State rows per ring tile: the fewest whole issues of :attr:`rows_per_issue`
        rows, dividing ``nheads·P``, whose ``(rows/rows_per_issue)·⌈N/lanes⌉`` issue cycles
        reach :attr:`gap` (all rows if none)."""
        return self._rows

    @property
    def tile_issues(self):
        """Issue cycles of one node's ring tile: ``(rows_per_tile/rows_per_issue)·⌈N/lanes⌉``."""
        return self._rows // self._cfg.rows_per_word * self._cfg.groups_per_row

    @property
    def tile_elems(self):
        """State elements per ring tile: ``rows_per_tile · d_state``."""
        return self._rows * self._cfg.d_state

    @property
    def tiles(self):
        """Tiles of a layer state: ``nheads·P / rows_per_tile``."""
        return self._cfg.nheads * self._cfg.headdim // self._rows

    @property
    def ring_words(self):
        """Words of each lane's ring bank: ``fifo_depth ·`` :attr:`tile_issues`."""
        return self._depth * self.tile_issues

    def ring_bits(self):
        """On-chip ring storage: ``32 · lanes ·`` :attr:`ring_words`."""
        return 32 * self._cfg.lanes * self.ring_words

    def pass_cycles(self, nodes):
        """Enabled cycles of a pass of ``nodes`` nodes without stalls (see Notes)."""
        c = self._cfg
        return (nodes * c.nheads + self.prologue_latency
                + self.tiles * nodes * max(self.tile_issues, self.gap) + self.latency)

    @property
    def module_name(self):
        c = self._cfg
        return (f"TreeSSMUnit_h{c.nheads}_p{c.headdim}_n{c.d_state}_l{c.lanes}"
                f"_t{self._max_nodes}_f{self._depth}_{self._ops.tag}"
                + (f"_w{c.input_words}" if c.input_words > 1 else ""))

    def elaborate(self, platform):
        m = Module()
        cfg, ops = self._cfg, self._ops
        H, P, L = cfg.nheads, cfg.headdim, cfg.lanes
        K, T, D = cfg.groups_per_row, self._max_nodes, self._depth
        # Q rows of a head an issue (lanes = Q·N), R issues of them a ring tile; B and C are
        # one row's BW = min(lanes, N) lanes, shared by the Q rows.
        Q, BW = cfg.rows_per_word, cfg.tree_width
        R = self._rows // Q
        W = cfg.input_words
        wb = index_width(W) if W > 1 else 0
        # An issue's Q x words are item (row mod W/Q) of an input beat of W/Q such items.
        wq = index_width(W // Q) if W > Q else 0
        RK = R * K
        last_lanes = self.last_lanes

        m.submodules.y_fifo = y_fifo = SyncFIFOBuffered(width=32 * Q, depth=self.Y_FIFO_DEPTH)
        m.submodules.st_fifo = st_fifo = SyncFIFOBuffered(width=32 * L, depth=self.ST_FIFO_DEPTH)
        # Registered clock enable (as SSMUnit): neither y.ready nor st_out.ready
        # reaches the pipeline; the FIFOs keep two entries of slack.
        en = Signal(init=1, name="en", attrs={"max_fanout": 64})
        m.d.sync += en.eq((y_fifo.level <= self.Y_FIFO_DEPTH - 2)
                          & (st_fifo.level <= self.ST_FIFO_DEPTH - 2))

        def mem(name, shape, depth):
            mm = Memory(shape=shape, depth=max(depth, 2), init=[])
            m.submodules[name] = mm
            return mm

        # Node banks: node j's words at j·(words per node) + index.
        bc = {sel: mem(f"mem_{'b' if sel == SEL_B else 'c'}", 32 * BW, T * K) for sel in (SEL_B, SEL_C)}
        xmem = mem("mem_x", 32 * W, T * H * P // W)
        dtmem = mem("mem_dt", 32 * W, T * H // W)
        par = {sel: mem(f"mem_{n}", 32 * W, H // W)
               for sel, n in ((SEL_A, "a"), (SEL_DT_BIAS, "dt_bias"), (SEL_D, "d"))}
        dmem = mem("mem_delta", 32, T * H)
        damem = mem("mem_da", 32, T * H)
        tbl = Memory(shape=table_layout(D), depth=max(T, 2), init=[])
        m.submodules.mem_table = tbl
        # The ring: one bank per lane, fifo_depth tiles each.
        ring_depth = max(self.ring_words, 2)
        banks = [submodule(m, f"ring_bank{i}", StateBank(depth=ring_depth)) for i in range(L)]
        rw = index_width(ring_depth)

        # -- host writes ----------------------------------------------------------------
        nodew = index_width(T)

        def node_addr(per_node, index, name):
            """``wr_node·per_node + index``. The product is a constant table indexed by
            ``wr_node`` (one LUT level per 6 index bits), not a multiplier: Yosys maps a
            constant multiply onto a DSP, 8 levels from the port to the RAM address."""
            width = index_width(max(T * per_node, 2))
            base = Signal(width, name=f"{name}_base")
            with m.Switch(self.wr_node):
                for j in range(T):
                    with m.Case(j):
                        m.d.comb += base.eq(j * per_node)
                with m.Default():
                    m.d.comb += base.eq(0)
            a = Signal(width, name=name)
            m.d.comb += a.eq(base + index)
            return a

        blocks = BW // W
        for sel, mm in bc.items():
            wp = mm.write_port(granularity=32)
            blk = Signal(index_width(max(blocks, 2)), name=f"wr_block_{sel}")
            kidx = Signal(index_width(max(K, 2)), name=f"wr_tile_{sel}")
            m.d.comb += [blk.eq(self.wr_addr % blocks), kidx.eq(self.wr_addr // blocks)]
            m.d.comb += [wp.addr.eq(node_addr(K, kidx, f"wr_bc_addr_{sel}")),
                         wp.data.eq(self.wr_data.replicate(blocks))]
            for i in range(BW):
                m.d.comb += wp.en[i].eq(self.wr_en & eq_const(self.wr_sel, sel) &
                                        (eq_const(blk, i // W) if blocks > 1 else C(1, 1)))
        for sel, mm, per in ((SEL_X, xmem, H * P // W), (SEL_DT, dtmem, H // W)):
            wp = mm.write_port()
            m.d.comb += [wp.addr.eq(node_addr(per, self.wr_addr, f"wr_addr_{sel}")),
                         wp.data.eq(self.wr_data), wp.en.eq(self.wr_en & eq_const(self.wr_sel, sel))]
        pw = index_width(max(H // W, 2))
        for sel, mm in par.items():
            wp = mm.write_port()
            m.d.comb += [wp.addr.eq(Cat(self.wr_addr, C(0, 8))[:pw]), wp.data.eq(self.wr_data),
                         wp.en.eq(self.wr_en & eq_const(self.wr_sel, sel))]
        tw = tbl.write_port()
        m.d.comb += [tw.addr.eq(self.tbl_node), tw.data.eq(self.tbl_entry), tw.en.eq(self.tbl_we)]

        # -- pass control -----------------------------------------------------------------
        n_last = Signal(nodew, name="n_last")            # nodes − 1
        out_node = Signal(nodew, name="out_node")
        out_en = Signal(name="out_en")
        pro_run, pro_wait, sw_run = (Signal(name=n) for n in ("pro_run", "pro_wait", "sw_run"))
        drain = Signal(name="drain")
        busy = Signal(name="busy_r")
        m.d.comb += [self.busy.eq(busy), self.cmd.ready.eq(~busy)]
        with m.If(self.cmd.valid & ~busy):
            m.d.sync += [busy.eq(1), pro_run.eq(1),
                         n_last.eq(self.cmd.payload.nodes - 1),
                         out_node.eq(self.cmd.payload.out_node), out_en.eq(self.cmd.payload.out_en)]

        # -- prologue: one (node, head) per enabled cycle ---------------------------------
        pro_issue = en & pro_run
        pro_h = _Counter(m, H, "pro_h")
        pro_node = Signal(nodew, name="pro_node")
        pro_idx = Signal(index_width(max(T * H, 2)), name="pro_idx")     # node·H + h
        pro_last = pro_h.last & (pro_node == n_last)
        pro_h.step(pro_issue)
        with m.If(pro_issue):
            m.d.sync += pro_idx.eq(Mux(pro_last, 0, add_const(pro_idx, 1, len(pro_idx))))
            with m.If(pro_h.last):
                m.d.sync += pro_node.eq(Mux(pro_last, 0, add_const(pro_node, 1, nodew)))
            with m.If(pro_last):
                m.d.sync += [pro_run.eq(0), pro_wait.eq(1)]
        rd_dt = dtmem.read_port(domain="sync")
        rd_bias = par[SEL_DT_BIAS].read_port(domain="sync")
        rd_a = par[SEL_A].read_port(domain="sync")
        hbeat = Cat(pro_h.value[wb:], C(0, 8))[:pw]
        m.d.comb += [rd_dt.addr.eq(pro_idx[wb:]), rd_bias.addr.eq(hbeat), rd_a.addr.eq(hbeat),
                     rd_dt.en.eq(en), rd_bias.en.eq(en), rd_a.en.eq(en)]
        dt_word = self._word(m, en, rd_dt.data, pro_idx, "dt_word")
        bias_word = self._word(m, en, rd_bias.data, pro_h.value, "bias_word")
        a_word = self._word(m, en, rd_a.data, pro_h.value, "a_word")
        tag1 = delay_line(m, en, Cat(pro_issue, pro_issue & pro_last, pro_idx), 1, "ptag1")
        delta_d, da_out, tag_end = self._prologue(m, en, dt_word, bias_word, a_word, tag1)
        wd, wda = dmem.write_port(), damem.write_port()
        m.d.comb += [wd.addr.eq(tag_end[2:]), wd.data.eq(delta_d), wd.en.eq(en & tag_end[0]),
                     wda.addr.eq(tag_end[2:]), wda.data.eq(da_out), wda.en.eq(en & tag_end[0])]
        sweep_go = Signal(name="sweep_go")
        m.d.comb += sweep_go.eq(en & tag_end[0] & tag_end[1])

        # -- sweep: tile → node → row issue (Q rows) → group -------------------------------
        k_c = _Counter(m, K, "sw_k")
        r_c = _Counter(m, R, "sw_r")
        blk = _Counter(m, H * P // (R * Q), "sw_blk")
        node = Signal(nodew, name="sw_node")
        node_last = node == n_last
        p_c, h_c = _Counter(m, P // Q, "sw_p"), _Counter(m, H, "sw_h")
        # The row issue: rows row·Q … row·Q + Q − 1.
        row = Signal(index_width(max(H * P // Q, 2)), name="sw_row")
        # The block's first row (and its head and column) to return to for each node.
        row0 = Signal.like(row, name="sw_row0")
        p0, h0 = Signal.like(p_c.value, name="sw_p0"), Signal.like(h_c.value, name="sw_h0")
        xbase = Signal(index_width(max(T * H * P // W, 2)), name="sw_xbase")
        bcbase = Signal(index_width(max(T * K, 2)), name="sw_bcbase")
        dhbase = Signal(index_width(max(T * H, 2)), name="sw_dhbase")
        rk = Signal(index_width(max(RK, 2)), name="sw_rk")
        # The current node's table entry and output flag, loaded when it starts.
        cur = Signal(table_layout(D), name="sw_entry")
        cur_out = Signal(name="sw_out")
        rd_tbl = tbl.read_port(domain="comb")
        in_group = Signal(name="in_group")
        # A node's issue j must come `gap` enabled cycles after its predecessor's issue j
        # (the parent's write-back of that word). Issues run in order, so when a group of
        # RK ≥ gap issues separates them nothing waits; a smaller whole state waits
        # gap − RK + 1 cycles after the predecessor's *last* issue, which stays safe when a
        # root's issues were stretched by st_in (counting from its first would not).
        need = max(1, self.gap - RK + 1)
        since = Signal(index_width(need + 1), init=need, name="since_group")
        with m.If(en & ~ge_const(since, need)):
            m.d.sync += since.eq(add_const(since, 1, len(since)))
        can = Signal(name="sw_can")
        m.d.comb += can.eq(sw_run & (in_group | ge_const(since, need))
                           & (~cur.root | self.st_in.valid))
        issue = Signal(name="sw_issue")
        m.d.comb += issue.eq(en & can)
        m.d.comb += self.st_in.ready.eq(issue & cur.root)
        group_end = issue & k_c.last & r_c.last
        pass_end = group_end & node_last & blk.last
        nxt = Signal(nodew, name="sw_next_node")
        m.d.comb += [nxt.eq(Mux(sweep_go | node_last, 0, add_const(node, 1, nodew))),
                     rd_tbl.addr.eq(nxt)]
        with m.If(sweep_go | group_end):
            m.d.sync += [cur.eq(rd_tbl.data), cur_out.eq(out_en & (nxt == out_node)), node.eq(nxt)]
        with m.If(sweep_go):
            m.d.sync += [sw_run.eq(1), pro_wait.eq(0)]
        with m.If(group_end):
            m.d.sync += since.eq(1)
        with m.If(issue):
            m.d.sync += in_group.eq(~(k_c.last & r_c.last))
            m.d.sync += rk.eq(Mux(k_c.last & r_c.last, 0, add_const(rk, 1, len(rk))))
        k_c.step(issue)
        r_c.step(issue & k_c.last)
        row_step = issue & k_c.last
        p_c.step(row_step & ~(r_c.last & ~node_last))
        h_c.step(row_step & p_c.last & ~(r_c.last & ~node_last))
        with m.If(row_step):
            m.d.sync += row.eq(add_const(row, 1, len(row)))
        with m.If(group_end):
            with m.If(node_last):
                # Next block: every node starts from the row after this block.
                m.d.sync += [row0.eq(add_const(row, 1, len(row))), xbase.eq(0), bcbase.eq(0),
                             dhbase.eq(0)]
                m.d.sync += [p0.eq(Mux(p_c.last, 0, add_const(p_c.value, 1, len(p0)))),
                             h0.eq(Mux(p_c.last, Mux(h_c.last, 0, add_const(h_c.value, 1, len(h0))),
                                       h_c.value))]
            with m.Else():
                m.d.sync += [row.eq(row0), p_c.value.eq(p0), h_c.value.eq(h0),
                             xbase.eq(add_const(xbase, H * P // W, len(xbase))),
                             bcbase.eq(add_const(bcbase, K, len(bcbase))),
                             dhbase.eq(add_const(dhbase, H, len(dhbase)))]
        blk.step(group_end & node_last)
        with m.If(pass_end):
            m.d.sync += [sw_run.eq(0), drain.eq(1), row.eq(0), row0.eq(0), p0.eq(0), h0.eq(0)]

        # reads at issue
        rd_x = xmem.read_port(domain="sync")
        rd_b = bc[SEL_B].read_port(domain="sync")
        rd_c = bc[SEL_C].read_port(domain="sync")
        rd_delta = dmem.read_port(domain="sync")
        rd_da = damem.read_port(domain="sync")
        rd_d = par[SEL_D].read_port(domain="sync")
        slot_tiles = [C(s * RK, rw) for s in range(D)]

        def slot_base(slot, name):
            base = Signal(rw, name=name)
            with m.Switch(slot):
                for s in range(D):
                    with m.Case(s):
                        m.d.comb += base.eq(slot_tiles[s])
            return base

        r_addr = Signal(rw, name="ring_rd_addr")
        w_addr = Signal(rw, name="ring_wr_addr")
        m.d.comb += [r_addr.eq(slot_base(cur.parent_slot, "parent_base") + rk),
                     w_addr.eq(slot_base(cur.write_slot, "write_base") + rk)]
        m.d.comb += [
            rd_x.addr.eq(xbase + row[wq:]),
            rd_b.addr.eq(bcbase + k_c.value), rd_c.addr.eq(bcbase + k_c.value),
            rd_delta.addr.eq(dhbase + h_c.value), rd_da.addr.eq(dhbase + h_c.value),
            rd_d.addr.eq(Cat(h_c.value[wb:], C(0, 8))[:pw]),
        ]
        for rp in (rd_x, rd_b, rd_c, rd_delta, rd_da, rd_d):
            m.d.comb += rp.en.eq(en)
        x_words = beat_word(m, en, rd_x.data, row, W // Q, "x_word", width=32 * Q)
        d_word = self._word(m, en, rd_d.data, h_c.value, "d_word")
        # A root's tile comes from st_in, registered at issue like the ring's read.
        st_in_d = Signal(32 * L, name="st_in_d", reset_less=True)
        with m.If(issue & cur.root):
            m.d.sync += st_in_d.eq(self.st_in.payload)
        ring_data = Signal(32 * L, name="ring_rd_data")
        # tags: valid, first group, last group, root, out, ring write address
        tag0 = Cat(issue, eq_const(k_c.value, 0), k_c.last, cur.root, cur_out, w_addr)
        t1 = delay_line(m, en, tag0, 1, "stag1")
        h_data = Mux(t1[3], st_in_d, ring_data)
        # Per row of the issue: u = delta·x and D·x (the first row keeps the one-row names).
        tags = self.row_tags()
        x_q = [x_words[32 * q:32 * (q + 1)] for q in range(Q)]
        u = [ops.mul(m, f"{t}row_mul_u", rd_delta.data, x, en) for t, x in zip(tags, x_q)]
        dx = [ops.mul(m, f"{t}row_mul_dx", d_word, x, en) for t, x in zip(tags, x_q)]
        hnew, tsums = self._emus(m, en, h_data, rd_b.data, rd_c.data, rd_da.data, t1[2], u)
        t_wb = delay_line(m, en, t1, self.emu_latency - 1, "stag_wb")
        wbv = en & t_wb[0]
        h_all = Cat(*hnew)
        for i, bank in enumerate(banks):
            sl = slice(32 * i, 32 * (i + 1))
            # Past column N − 1 of a row's last tile nothing is written (as SSMUnit).
            w_en = wbv & ~t_wb[2] if i % BW >= last_lanes else wbv
            m.d.comb += [bank.r_addr.eq(r_addr), bank.r_en.eq(en), ring_data[sl].eq(bank.r_data),
                         bank.w_addr.eq(t_wb[5:]), bank.w_en.eq(w_en), bank.w_data.eq(h_all[sl])]
        m.d.comb += [st_fifo.w_data.eq(h_all), st_fifo.w_en.eq(wbv & t_wb[4]),
                     self.st_out.payload.eq(st_fifo.r_data), self.st_out.valid.eq(st_fifo.r_rdy),
                     st_fifo.r_en.eq(self.st_out.ready)]
        t_acc = delay_line(m, en, t1, self._t_tree - 1, "stag_acc")
        # end of pass: every row's y out and every st_out tile taken
        inflight = self._y_out(m, en, y_fifo,
                               [self._row_out(m, en, ts, t_acc, d, tag=t)
                                for ts, d, t in zip(tsums, dx, tags)], issue & k_c.last)
        with m.If(drain & ~inflight.any() & ~st_fifo.r_rdy):
            m.d.sync += [drain.eq(0), busy.eq(0)]
        return m

    def _word(self, m, en, data, index, name):
        return beat_word(m, en, data, index, self._cfg.input_words, name)
