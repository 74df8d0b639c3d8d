"""``SSMEngine``: the tile-streamed tree SSM unit fed from memory and writing to it.

One descriptor runs one layer pass of :class:`hw.tree_ssm.TreeSSMUnit` with every
word in memory (``docs/memory.md``): the layer parameters and the nodes' inputs
are read by one AXI4 read master, the committed state streams in tile by tile
through a second, and the chosen node's new state and every node's ``y`` leave
through two write masters. The host (or a layer sequencer) writes descriptors
and the node table, never a data word. The committed state is read from
``state_in_addr`` and written to ``state_out_addr``: with two state banks (the
host flips them after a pass is done) a reset in mid-pass leaves the committed
state whole, and a draft's speculative states never overwrite it (SpecMamba's
restore is then a change of base address, no copy).

Memory layouts (little-endian binary32 words; addresses in bytes, each aligned to
its port's beat):

* parameters at ``params_addr``: ``A[0:H]``, ``dt_bias[0:H]``, ``D[0:H]``;
* input record ``s`` at ``input_addr + s·record_bytes``: ``B[0:N]``, ``C[0:N]``,
  ``x[0:H·P]``, ``dt[0:H]`` (:attr:`record_bytes`); node ``j`` of a pass reads the
  record its table entry names (``tbl_src``): ``j`` in a tree pass, the ``j``-th
  node of the accepted path in a commit pass, which replays the path from the
  committed state (SpecMamba's replay backtracking) and writes only its last state;
* state: the tile port's order of :class:`hw.ssm_unit.SSMUnit` (row ``r``, tile
  ``k`` at ``(r·⌈N/lanes⌉ + k)·lanes`` words), :attr:`state_bytes` per layer, striped
  over the ``S = ssm.state_ports`` state ports (:func:`golden.memory_map.stripe_state`):
  port ``p`` reads (and writes) the stripe at ``state_in_addr + p·stripe_bytes`` (and
  ``state_out_addr + p·stripe_bytes``), words ``p·lanes/S …`` of every unit word;
* ``y``: node ``j``'s ``y[h, p]`` at ``y_addr + 4·(j·H·P + h·P + p)``.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out, connect

from specgen.golden.config import Config
from specgen.golden.memory_map import ssm_engine_layout
from specgen.golden.validate import check_int
from specgen.hw.axi_master import AXI4ReadMaster, AXI4WriteMaster
from specgen.hw.bits import index_width
from specgen.hw.fp_arith import add_const
from specgen.hw.hierarchy import submodule
from specgen.hw.ssm_unit import SEL_A, SEL_B, SEL_C, SEL_D, SEL_DT, SEL_DT_BIAS, SEL_X
from specgen.hw.tree_ssm import TreeSSMUnit, table_layout

__all__ = ["SSMEngine", "StreamDownsizer", "descriptor_layout", "state_port_shape"]

#: Words of the FIFO that joins the state ports' slices into the unit's word (several
#: ports), and of each port's FIFO on the way out: enough to run at one word a cycle
#: with registered handshakes on the unit's side.
JOIN_DEPTH = 4
FORK_DEPTH = 4


def descriptor_layout(*, max_nodes, addr_width):
    """One layer pass: ``nodes``, ``out_en``/``out_node`` (write that node's state),
    ``y_en`` (write the nodes' ``y``; a commit pass drops them), ``load_params``, and
    the byte addresses of the module docstring."""
    return data.StructLayout({
        "nodes": range(1, max_nodes + 1), "out_node": index_width(max_nodes), "out_en": 1,
        "y_en": 1, "load_params": 1, "params_addr": addr_width, "input_addr": addr_width,
        "state_in_addr": addr_width, "state_out_addr": addr_width, "y_addr": addr_width,
    })


def state_port_shape(config):
    """``(data_bits, slice_bits)`` of each state port of ``config``'s engine: the port's
    AXI data width, ``min(memory_port_bits, slice_bits)``, and its slice of the unit's
    word, ``32·lanes/state_ports`` bits, which its read master packs beats into and its
    write master splits into beats (a slice a fabric cycle at most, each way)."""
    c = config.ssm
    slice_bits = 32 * c.lanes // c.state_ports
    return min(config.board.memory_port_bits, slice_bits), slice_bits


def _table(values, index):
    """``values[index]`` as a constant table, padded with its last entry to every value
    of ``index`` (a case for each, as Verilator's CASEINCOMPLETE requires)."""
    values = list(values) + [values[-1]] * ((1 << len(index)) - len(values))
    return Array(values)[index]


class StreamDownsizer(wiring.Component):
    """A stream of ``in_width``-bit words out as ``in_width/out_width`` words, low first.

    Parameters
    ----------
    in_width, out_width : int
        ``out_width`` divides ``in_width``.

    Attributes
    ----------
    i : In(stream.Signature(in_width))
    o : Out(stream.Signature(out_width))
        ``o.valid`` is a register; a word is taken on ``i`` the cycle its last slice
        leaves (or while empty), so the stream runs at one slice per cycle.
    """

    def __init__(self, *, in_width, out_width):
        self._in = check_int("StreamDownsizer", "in_width", in_width, min=1)
        self._out = check_int("StreamDownsizer", "out_width", out_width, min=1, max=in_width)
        if in_width % out_width:
            raise ValueError(f"StreamDownsizer.out_width must divide in_width ({in_width}), "
                             f"not {out_width!r}")
        super().__init__({"i": In(stream.Signature(in_width)),
                          "o": Out(stream.Signature(out_width))})

    @property
    def module_name(self):
        return f"StreamDownsizer_i{self._in}_o{self._out}"

    def elaborate(self, platform):
        m = Module()
        ratio = self._in // self._out
        word = Signal(self._in, name="word", reset_less=True)
        full = Signal(name="full")
        part = Signal(index_width(max(ratio, 2)), name="part")
        last = part == ratio - 1
        m.d.comb += [self.o.valid.eq(full), self.i.ready.eq(~full | (self.o.ready & last))]
        if ratio == 1:
            m.d.comb += self.o.payload.eq(word)
        else:
            # A case per slice, not word_select: its shift is as wide as the word, which
            # Verilator's -Wall rejects as a truncation.
            with m.Switch(part):
                for k in range(ratio):
                    with m.Case(k):
                        m.d.comb += self.o.payload.eq(word[k * self._out:(k + 1) * self._out])
                with m.Default():
                    m.d.comb += self.o.payload.eq(0)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += part.eq(0 if ratio == 1 else add_const(part, 1, len(part)))
            with m.If(last):
                m.d.sync += [full.eq(0), part.eq(0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [word.eq(self.i.payload), full.eq(1), part.eq(0)]
        return m


class SSMEngine(wiring.Component):
    """:class:`hw.tree_ssm.TreeSSMUnit` with its inputs, state and outputs in memory.

    Parameters
    ----------
    config : golden.config.Config
        The SSM unit (``ssm``, ``pipeline``), the tree (``tree.max_nodes``,
        ``tree.fifo_depth``) and the board's memory ports (``board``). With
        ``ssm.head_groups`` > 1 the engine is one pass's (``ssm.pass_config``: a group
        of heads), and a layer is that many descriptors (:mod:`hw.step_program`).
    addr_width : int
        Byte-address width of every AXI port (default 40).
    **master_overrides
        Overrides of every AXI master's parameters (``max_burst``,
        ``max_outstanding``, ``fifo_depth``), as in
        :meth:`hw.axi_master.AXI4ReadMaster.from_config`.

    Attributes
    ----------
    desc : In(stream.Signature(descriptor_layout(...)))
        A layer pass; taken when the engine is idle.
    tbl_we, tbl_node, tbl_entry, tbl_src : In
        The node table of :class:`hw.tree_ssm.TreeSSMUnit`, and the input record of
        each node (write while idle).
    busy : Out(1)
        From the cycle after ``desc`` is taken until every ``y`` and state write of
        the pass has its B response.
    passes : Out(32)
        Passes completed since reset.
    error : Out(1)
        Sticky: an AXI response other than OKAY on any port.
    m_axi_in, m_axi_st_rd0 … m_axi_st_rd(S − 1) : Out(axi4_read_signature), domain ``mem``
    m_axi_st_wr0 … m_axi_st_wr(S − 1), m_axi_y : Out(axi4_write_signature), domain ``mem``
        ``S = ssm.state_ports`` state ports each way, port ``p`` on stripe ``p``.
        Widths: inputs ``32·input_words`` bits, state ``min(memory_port_bits,
        32·lanes/S)``, ``y`` ``32·Q`` bits, ``Q`` rows an issue of the unit
        (:attr:`golden.mamba2.SSMConfig.rows_per_word`; :attr:`port_widths`).
    """

    def __init__(self, *, config, addr_width=40, **master_overrides):
        if not isinstance(config, Config):
            raise TypeError(f"SSMEngine.config must be a golden.config.Config, not {config!r}")
        # The engine runs one pass of ssm.head_groups a descriptor: it is built, and
        # lays out its records and state, for a pass's heads.
        if config.ssm.head_groups > 1:
            config = config.replace(ssm=config.ssm.pass_config)
        self._config = config
        self._unit = TreeSSMUnit.from_config(config)
        c = config.ssm
        self._aw = check_int("SSMEngine", "addr_width", addr_width, min=12, max=64)
        S = self._ports = c.state_ports
        # A port's slice of the unit's word, a fabric cycle each way: the masters pack
        # and split the port's beats (VHK158: 256-bit beats at 450 MHz, 256- or 512-bit
        # slices at 250 MHz).
        st_bits, self._slice = state_port_shape(config)
        # y: the unit's beat, an issue's rows (one binary32 word, or Q side by side).
        widths = {"in": 32 * c.input_words, "st": st_bits, "y": 32 * c.rows_per_word}
        self._widths = widths
        kw = dict(master_overrides, addr_width=self._aw)
        # One input beat a cycle is what the unit's write port takes: no packing.
        self._in_rd = AXI4ReadMaster.from_config(config, data_width=widths["in"],
                                                 out_width=widths["in"], **kw)
        self._st_rd = [AXI4ReadMaster.from_config(config, data_width=widths["st"],
                                                  out_width=self._slice, **kw) for _ in range(S)]
        # A write master takes its slice a fabric cycle and splits it at the memory clock.
        self._st_wr = [AXI4WriteMaster.from_config(config, data_width=widths["st"],
                                                   in_width=self._slice, **kw)
                       for _ in range(S)]
        self._y_wr = AXI4WriteMaster.from_config(config, data_width=widths["y"], **kw)
        u = self._unit
        super().__init__({
            "desc": In(stream.Signature(descriptor_layout(max_nodes=u.max_nodes,
                                                          addr_width=self._aw))),
            "tbl_we": In(1), "tbl_node": In(index_width(u.max_nodes)),
            "tbl_entry": In(table_layout(u.fifo_depth)), "tbl_src": In(index_width(u.max_nodes)),
            "busy": Out(1), "passes": Out(32), "error": Out(1),
            "m_axi_in": Out(self._in_rd.signature.members["axi"].signature),
            **{f"m_axi_st_rd{q}": Out(self._st_rd[q].signature.members["axi"].signature)
               for q in range(S)},
            **{f"m_axi_st_wr{q}": Out(self._st_wr[q].signature.members["axi"].signature)
               for q in range(S)},
            "m_axi_y": Out(self._y_wr.signature.members["axi"].signature),
        })

    unit = property(lambda self: self._unit)
    port_widths = property(lambda self: dict(self._widths))
    #: State ports each way (``ssm.state_ports``).
    state_ports = property(lambda self: self._ports)

    @property
    def record_bytes(self):
        """Bytes of one node's inputs: ``4·(2N + H·P + H)``
        (:func:`golden.memory_map.ssm_engine_layout`, which lays out the memory map)."""
        return ssm_engine_layout(self._config).record_bytes

    @property
    def state_bytes(self):
        """Bytes of one layer's state in the tile order: ``4·H·P·⌈N/lanes⌉·lanes``
        (:func:`golden.memory_map.ssm_engine_layout`)."""
        return ssm_engine_layout(self._config).state_bytes

    @property
    def stripe_bytes(self):
        """Bytes of one state port's stripe, ``state_bytes / S``."""
        return ssm_engine_layout(self._config).stripe_bytes

    @property
    def module_name(self):
        name = "SSMEngine_" + self._unit.module_name.removeprefix("TreeSSMUnit_")
        return name if self._ports == 1 else f"{name}_s{self._ports}"

    def elaborate(self, platform):
        m = Module()
        c = self._config.ssm
        H, P, N = c.state_shape
        W = c.input_words
        u = submodule(m, "unit", self._unit)
        # The masters run in two clock domains (sync and mem): plain submodules.
        S, sl = self._ports, self._slice
        m.submodules.in_rd = in_rd = self._in_rd
        st_rd, st_wr = self._st_rd, self._st_wr
        for q in range(S):
            m.submodules[f"st_rd{q}"] = st_rd[q]
            m.submodules[f"st_wr{q}"] = st_wr[q]
            wiring.connect(m, wiring.flipped(getattr(self, f"m_axi_st_rd{q}")), st_rd[q].axi)
            wiring.connect(m, wiring.flipped(getattr(self, f"m_axi_st_wr{q}")), st_wr[q].axi)
        m.submodules.y_wr = y_wr = self._y_wr
        wiring.connect(m, wiring.flipped(self.m_axi_in), in_rd.axi)
        wiring.connect(m, wiring.flipped(self.m_axi_y), y_wr.axi)
        if S == 1:
            connect(m, st_rd[0].data, u.st_in)
        else:
            # The unit's word is the ports' slices side by side, joined into a buffered
            # FIFO when every port has its slice: the unit sees a registered valid and
            # word, and its ready (deep in its sweep logic) reaches no master.
            m.submodules.st_join = join = SyncFIFOBuffered(width=32 * c.lanes,
                                                            depth=JOIN_DEPTH)
            take = Signal(name="st_join_take")
            m.d.comb += [take.eq(Cat(r.data.valid for r in st_rd).all() & join.w_rdy),
                         join.w_en.eq(take), join.w_data.eq(Cat(r.data.payload for r in st_rd)),
                         u.st_in.valid.eq(join.r_rdy), u.st_in.payload.eq(join.r_data),
                         join.r_en.eq(u.st_in.ready)]
            m.d.comb += [r.data.ready.eq(take) for r in st_rd]
        if S == 1:
            connect(m, u.st_out, st_wr[0].data)
        else:
            # The word forks into a small FIFO per port: the unit's word leaves when
            # every FIFO has room (each a compare of its own level), and no master's
            # ready reaches the unit.
            forks = [SyncFIFO(width=sl, depth=FORK_DEPTH) for _ in range(S)]
            room = Signal(name="st_fork_room")
            m.d.comb += [room.eq(Cat(f.w_rdy for f in forks).all()), u.st_out.ready.eq(room)]
            for q, f in enumerate(forks):
                m.submodules[f"st_fork{q}"] = f
                m.d.comb += [f.w_en.eq(u.st_out.valid & room),
                             f.w_data.eq(u.st_out.payload[q * sl:(q + 1) * sl]),
                             st_wr[q].data.valid.eq(f.r_rdy), st_wr[q].data.payload.eq(f.r_data),
                             f.r_en.eq(st_wr[q].data.ready)]
        y_en = Signal(name="y_en")
        # Without y_en the rows are taken and dropped (a commit pass).
        m.d.comb += [y_wr.data.payload.eq(u.y.payload), y_wr.data.valid.eq(u.y.valid & y_en),
                     u.y.ready.eq(Mux(y_en, y_wr.data.ready, 1)),
                     u.tbl_we.eq(self.tbl_we), u.tbl_node.eq(self.tbl_node),
                     u.tbl_entry.eq(self.tbl_entry),
                     self.error.eq(Cat(in_rd.error, y_wr.error, *(x.error for x in st_rd),
                                       *(x.error for x in st_wr)).any())]

        d = Signal.like(self.desc.payload, name="d")
        m.d.comb += y_en.eq(d.y_en)
        busy = Signal(name="busy_r")
        m.d.comb += [self.busy.eq(busy), self.desc.ready.eq(~busy)]

        # -- the pass's sequence: read commands, input loading, unit command, writes --
        def shift(addr, bits):
            return addr[(bits // 8 - 1).bit_length():]

        in_beat = self._widths["in"]
        st_beat = self._widths["st"]
        rec_beats = self.record_bytes * 8 // in_beat
        par_beats = 3 * H // W
        max_nodes = self._unit.max_nodes
        n = Signal(range(max_nodes + 1), name="n")
        # n - 1 and n - 2, registered with the descriptor: the "last node" tests of the
        # counters below compare with a register, not with a subtraction.
        n_m1 = Signal(range(max_nodes), name="n_m1")
        n_m2 = Signal(range(-1, max_nodes), name="n_m2")
        one_node = Signal(name="one_node")
        # Commands still to issue on each master (one each, except y: one per node).
        want = Signal(2, name="cmd_pending")      # params, inputs
        want_rd = Signal(S, name="st_rd_pending")  # a state read per port
        want_wr = Signal(S, name="st_wr_pending")  # a state write per port
        accept = Signal(name="accept")
        m.d.comb += accept.eq(self.desc.valid & ~busy)
        with m.If(accept):
            p = self.desc.payload
            m.d.sync += [d.eq(p), busy.eq(1), n.eq(p.nodes), n_m1.eq(p.nodes - 1),
                         n_m2.eq(p.nodes - 2), one_node.eq(p.nodes == 1),
                         want.eq(Cat(p.load_params, 1)), want_rd.eq(0), want_wr.eq(0)]
        # input reads: the parameters (if asked), then every node's record
        # Each node's record, from the source table (a commit pass gathers the path's).
        # The table holds the record's beat offset src·rec_beats, written through a
        # constant table of s·rec_beats (one LUT level from tbl_src), so no multiply
        # sits between the table and the read command.
        rec_off = [s * rec_beats for s in range(max_nodes)]
        recs = Memory(shape=range(max(rec_off) + 1), depth=max(max_nodes, 2), init=[])
        m.submodules.mem_src = recs
        sw = recs.write_port()
        m.d.comb += [sw.addr.eq(self.tbl_node), sw.data.eq(_table(rec_off, self.tbl_src)),
                     sw.en.eq(self.tbl_we)]
        sr = recs.read_port(domain="comb")
        rd_node = Signal(index_width(max_nodes), name="rd_node")
        rec_addr = Signal(self._aw, name="rec_addr")           # registered: input + src · record beats
        rec_ok = Signal(name="rec_ok")
        m.d.comb += sr.addr.eq(rd_node)
        with m.If(accept):
            m.d.sync += [rd_node.eq(0), rec_ok.eq(0)]
        with m.Elif(want[1] & ~rec_ok):
            m.d.sync += [rec_addr.eq(shift(d.input_addr, in_beat) + sr.data), rec_ok.eq(1)]
        m.d.comb += in_rd.cmd.valid.eq(want[0] | (want[1] & rec_ok))
        with m.If(want[0]):
            m.d.comb += [in_rd.cmd.payload.addr.eq(shift(d.params_addr, in_beat)),
                         in_rd.cmd.payload.beats.eq(par_beats)]
        with m.Else():
            m.d.comb += [in_rd.cmd.payload.addr.eq(rec_addr),
                         in_rd.cmd.payload.beats.eq(rec_beats)]
        with m.If(in_rd.cmd.valid & in_rd.cmd.ready):
            with m.If(want[0]):
                m.d.sync += want[0].eq(0)
            with m.Else():
                m.d.sync += [rec_ok.eq(0), rd_node.eq(add_const(rd_node, 1, len(rd_node)))]
                with m.If(rd_node == n_m1):
                    m.d.sync += want[1].eq(0)
        # the committed state streams in as the unit asks for it, stripe q through
        # port q. The stripes' addresses are registers loaded the cycle after the
        # descriptor (base + a constant offset each), and the commands wait for them.
        stripe_beats = self.stripe_bytes * 8 // st_beat
        st_ok = Signal(name="st_addr_ok")
        st_load = Signal(name="st_addr_load")
        m.d.comb += st_load.eq(busy & ~st_ok)
        ones = (1 << S) - 1
        with m.If(accept):
            m.d.sync += st_ok.eq(0)
        with m.Elif(st_load):
            m.d.sync += [st_ok.eq(1), want_rd.eq(ones), want_wr.eq(Mux(d.out_en, ones, 0))]
        for q in range(S):
            rd_addr = Signal(self._aw, name=f"st_rd{q}_addr")
            wr_addr = Signal(self._aw, name=f"st_wr{q}_addr")
            with m.If(st_load):
                m.d.sync += [rd_addr.eq(add_const(shift(d.state_in_addr, st_beat),
                                                  q * stripe_beats, self._aw)),
                             wr_addr.eq(add_const(shift(d.state_out_addr, st_beat),
                                                  q * stripe_beats, self._aw))]
            m.d.comb += [st_rd[q].cmd.valid.eq(want_rd[q]),
                         st_rd[q].cmd.payload.addr.eq(rd_addr),
                         st_rd[q].cmd.payload.beats.eq(stripe_beats),
                         st_wr[q].cmd.valid.eq(want_wr[q]),
                         st_wr[q].cmd.payload.addr.eq(wr_addr),
                         st_wr[q].cmd.payload.beats.eq(stripe_beats)]
            with m.If(st_rd[q].cmd.valid & st_rd[q].cmd.ready):
                m.d.sync += want_rd[q].eq(0)
            with m.If(st_wr[q].cmd.valid & st_wr[q].cmd.ready):
                m.d.sync += want_wr[q].eq(0)

        # loader: the read beats into the unit's write port. The sections run in one
        # sequence, the parameters' (0-2) then each node's (3-6); a section's beats
        # are counted down in ``left`` and its last beat is a registered flag, and
        # everything a section decides (select, length) is a function of its index.
        sections = [(SEL_A, H // W), (SEL_DT_BIAS, H // W), (SEL_D, H // W),
                    (SEL_B, N // W), (SEL_C, N // W), (SEL_X, H * P // W), (SEL_DT, H // W)]
        first_node_sec, last_sec = 3, len(sections) - 1
        section = Signal(range(len(sections)), name="section")
        beat = Signal(index_width(max(H * P // W, N // W, 2)), name="beat")
        left = Signal.like(beat, name="beats_left")     # beats after this one in the section
        sec_last = Signal(name="section_last")
        sel = Signal(3, name="load_sel")
        node = Signal(index_width(max_nodes), name="load_node")
        node_last = Signal(name="load_node_last")       # node == n - 1
        loaded = Signal(name="loaded")

        def enter(index):
            """Statements that start section ``index`` (a Value)."""
            beats = _table([Const(b - 1, len(left)) for _, b in sections], index)
            ones = _table([Const(int(b == 1), 1) for _, b in sections], index)
            sels = _table([Const(s, 3) for s, _ in sections], index)
            return [section.eq(index), beat.eq(0), left.eq(beats), sec_last.eq(ones),
                    sel.eq(sels)]

        nxt = Signal.like(section, name="section_next")
        m.d.comb += nxt.eq(Mux(section == last_sec, first_node_sec, section + 1))
        with m.If(accept):
            m.d.sync += enter(Mux(self.desc.payload.load_params, 0, first_node_sec))
            m.d.sync += [node.eq(0), node_last.eq(self.desc.payload.nodes == 1), loaded.eq(0)]
        take = Signal(name="load_take")
        m.d.comb += [in_rd.data.ready.eq(busy & ~loaded), take.eq(in_rd.data.valid & in_rd.data.ready),
                     u.wr_en.eq(take), u.wr_sel.eq(sel), u.wr_addr.eq(beat), u.wr_node.eq(node),
                     u.wr_data.eq(in_rd.data.payload)]
        with m.If(take):
            with m.If(sec_last):
                m.d.sync += enter(nxt)
                with m.If(section == last_sec):
                    with m.If(node_last):
                        m.d.sync += loaded.eq(1)
                    with m.Else():
                        m.d.sync += [node.eq(add_const(node, 1, len(node))),
                                     node_last.eq(node == n_m2)]
            with m.Else():
                m.d.sync += [beat.eq(add_const(beat, 1, len(beat))), left.eq(left - 1),
                             sec_last.eq(left == 1)]

        # the unit's pass, once every input word is in
        started = Signal(name="started")
        with m.If(accept):
            m.d.sync += started.eq(0)
        m.d.comb += [u.cmd.valid.eq(busy & loaded & ~started),
                     u.cmd.payload.nodes.eq(n), u.cmd.payload.out_node.eq(d.out_node),
                     u.cmd.payload.out_en.eq(d.out_en)]
        with m.If(u.cmd.valid & u.cmd.ready):
            m.d.sync += started.eq(1)
        # y: one write region per node group of a tile (rows_per_tile words, Q a beat), at
        # the node's row offset, so y lands node-major whatever the unit's order. The
        # address is a register, in beats: the tile's first row, plus H·P words per node.
        Q = c.rows_per_word
        R, tiles = self._unit.rows_per_tile // Q, self._unit.tiles
        yt = Signal(index_width(max(tiles, 2)), name="y_tile")   # 1 bit for one tile
        yn = Signal(index_width(max_nodes), name="y_node")
        y_last = Signal(name="y_node_last")                     # yn == n - 1
        y_row = Signal(self._aw, name="y_tile_addr")            # beats: y_addr/4Q + yt·R
        y_cmd = Signal(self._aw, name="y_cmd_addr")             # beats: y_row + yn·H·P/Q
        y_issue = Signal(name="y_issue")
        y_all = Signal(name="y_all_issued")
        with m.If(accept):
            p = self.desc.payload
            y_beat = self._widths["y"]
            m.d.sync += [yt.eq(0), yn.eq(0), y_last.eq(p.nodes == 1),
                         y_row.eq(shift(p.y_addr, y_beat)), y_cmd.eq(shift(p.y_addr, y_beat)),
                         y_all.eq(0)]
        m.d.comb += [y_wr.cmd.valid.eq(busy & started & ~y_all & y_en),
                     y_wr.cmd.payload.addr.eq(y_cmd),
                     y_wr.cmd.payload.beats.eq(R),
                     y_issue.eq(y_wr.cmd.valid & y_wr.cmd.ready)]
        with m.If(y_issue):
            with m.If(y_last):
                m.d.sync += [yn.eq(0), y_last.eq(one_node), yt.eq(yt + 1),
                             y_row.eq(y_row + R), y_cmd.eq(y_row + R)]
                with m.If(yt == tiles - 1):
                    m.d.sync += y_all.eq(1)
            with m.Else():
                m.d.sync += [yn.eq(yn + 1), y_last.eq(yn == n_m2), y_cmd.eq(y_cmd + H * P // Q)]
        # done: every region answered. The masters count B responses (``done``); a
        # count of regions in flight per master goes up with each command taken and
        # down, a cycle later, with each step of ``done``, and its zero is a register.
        def in_flight(master, issued, name):
            prev = Signal(32, name=f"{name}_done_prev")
            step = Signal(name=f"{name}_done_step")
            count = Signal(range(max_nodes * tiles + 2), name=f"{name}_in_flight")
            zero = Signal(init=1, name=f"{name}_idle")
            m.d.sync += [prev.eq(master.done), step.eq(master.done != prev)]
            with m.If(issued & ~step):
                m.d.sync += [count.eq(count + 1), zero.eq(0)]
            with m.Elif(step & ~issued):
                m.d.sync += [count.eq(count - 1), zero.eq(count == 1)]
            return zero

        y_idle = in_flight(y_wr, y_issue, "y")
        st_idle = Cat(in_flight(st_wr[q], st_wr[q].cmd.valid & st_wr[q].cmd.ready, f"st{q}")
                      for q in range(S)).all()
        finished = Signal(name="finished")
        m.d.comb += finished.eq(busy & started & (y_all | ~y_en) & ~u.busy & ~want.any()
                                & st_ok & ~want_rd.any() & ~want_wr.any() & y_idle & st_idle)
        with m.If(finished):
            m.d.sync += [busy.eq(0), self.passes.eq(self.passes + 1)]
        return m
