"""AXI4 burst masters to HBM and DDR, with a crossing into the memory clock domain.

The fabric side runs in ``sync``; the AXI4 side in a domain ``mem`` clocked at
the board's ``memory_clock_mhz`` (:class:`golden.config.BoardConfig`). Commands
are cut into bursts in ``sync``; bursts and data cross between the domains through
:class:`hw.cdc_fifo.CDCFIFO` (Gray-coded pointers, Cummings' style #2, with Amaranth
``AsyncFIFO``'s ports and timing, and every stage within 3 logic levels), so the
memory clock, 450 MHz on VHK158, holds only the AXI channels' logic.

* :class:`AXI4ReadMaster` turns commands (a contiguous region, in beats) into
  INCR read bursts and streams the data back in order: the weight stream of the
  linear unit, and the committed state of a layer.
* :class:`AXI4WriteMaster` turns commands plus a data stream into write bursts.

Both keep several bursts in flight (Little's law: a port at full rate needs
bandwidth × latency bytes outstanding, ``docs/memory.md``), never let a burst
cross a 4 KB boundary (AMBA AXI4, A3.4.1), and use one AXI ID, so AXI's ordering
rules return read data and write responses in issue order.

Reset contract: ``sync`` and ``mem`` are reset together, and the AXI
subordinate with them (ARESETn resets both ends of an AXI interface, AMBA AXI4
A3.1.2). Commands accepted before the reset are dropped; every command after it
completes exactly once.
"""

from amaranth import C, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from specgen.golden.config import MEMORY_PORT_BITS, READ_REORDER_BYTES
from specgen.golden.validate import check_choice, check_int
from specgen.hw.cdc_fifo import CDCFIFO

__all__ = ["AXI4ReadMaster", "AXI4WriteMaster", "axi4_read_signature", "axi4_write_signature",
           "command_layout", "PAGE_BYTES", "AXI4_MAX_BURST"]

#: No INCR burst may cross a 4 KB address boundary (AMBA AXI4 A3.4.1).
PAGE_BYTES = 4096
#: AXI4 INCR bursts hold 1 to 256 beats (AxLEN + 1); PG313 "AXI Considerations" allows AxLen 256.
AXI4_MAX_BURST = 256
#: AxBURST INCR.
BURST_INCR = 0b01
#: AxCACHE "normal non-cacheable bufferable": modifiable, which PG313 requires of an
#: HBM_NMU INCR burst narrower than 128 bits with more than one beat.
CACHE_MODIFIABLE = 0b0011
#: Depth of the command crossings: commands are few and long.
COMMAND_DEPTH = 4
#: ``mem`` cycles for a credit to come back through the data crossing: the read
#: side's pointer, its Gray synchronizer into ``mem`` (2) and ``w_level``'s register,
#: with margin for the phase between the clocks.
CROSSING_CYCLES = 8
#: ``mem`` cycles from one burst's issue to the next, at the soonest: the credit check
#: is two registered stages of arithmetic on one cycle's counters and a registered
#: comparison, so that each stage is one carry chain (the logic-level budget of
#: ``docs/estimate.md``). A burst carries at least this many beats in the steady
#: state of every preset, so the address channel stays ahead of the data.
ISSUE_SPACING = 4


def command_layout(beat_bits):
    """A command: ``addr``, the region's first beat (byte address ÷ bytes per beat),
    and ``beats``, its length (0 is a no-op)."""
    return data.StructLayout({"addr": beat_bits, "beats": beat_bits + 1})


def axi4_read_signature(*, addr_width, data_width, id_width):
    """AR and R channels of an AXI4 manager, named as AMBA names them (``araddr`` ...)."""
    return wiring.Signature({
        "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2),
        "arid": Out(id_width), "arcache": Out(4), "arprot": Out(3),
        "arvalid": Out(1), "arready": In(1),
        "rdata": In(data_width), "rid": In(id_width), "rresp": In(2), "rlast": In(1),
        "rvalid": In(1), "rready": Out(1),
    })


def axi4_write_signature(*, addr_width, data_width, id_width):
    """AW, W and B channels of an AXI4 manager."""
    return wiring.Signature({
        "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3), "awburst": Out(2),
        "awid": Out(id_width), "awcache": Out(4), "awprot": Out(3),
        "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
        "wvalid": Out(1), "wready": In(1),
        "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
    })


class _Params:
    """Validation and derived sizes shared by both masters."""

    def _init_params(self, owner, *, addr_width, data_width, id_width, max_burst,
                     max_outstanding, fifo_depth, memory):
        self._memory = check_choice(owner, "memory", memory, tuple(MEMORY_PORT_BITS))
        widths = MEMORY_PORT_BITS[memory]
        if isinstance(data_width, bool) or data_width not in widths:
            raise ValueError(f"{owner}.data_width must be one of "
                             f"{', '.join(map(str, widths))} for memory {memory!r}, not "
                             f"{data_width!r}")
        self._data_width = data_width
        self._bytes = data_width // 8
        self._size = (self._bytes - 1).bit_length()
        # The region of one command must hold at least one 4 KB page.
        self._addr_width = check_int(owner, "addr_width", addr_width, min=12, max=64)
        self._id_width = check_int(owner, "id_width", id_width, min=1, max=32)
        self._page_beats = PAGE_BYTES // self._bytes
        self._max_burst = check_int(owner, "max_burst", max_burst, min=1,
                                    max=min(AXI4_MAX_BURST, self._page_beats))
        self._max_outstanding = check_int(owner, "max_outstanding", max_outstanding, min=1,
                                          max=256)
        depth = check_int(owner, "fifo_depth", fifo_depth, min=self._max_burst, max=1 << 16)
        if depth & (depth - 1):
            # CDCFIFO holds a power of two; a rounded-up depth would not match the credits.
            raise ValueError(f"{owner}.fifo_depth must be a power of two >= max_burst "
                             f"({self._max_burst}), not {depth!r}")
        self._fifo_depth = depth
        self._beat_bits = self._addr_width - self._size
        self._cmd_layout = command_layout(self._beat_bits)

    addr_width = property(lambda self: self._addr_width)
    data_width = property(lambda self: self._data_width)
    id_width = property(lambda self: self._id_width)
    max_burst = property(lambda self: self._max_burst)
    max_outstanding = property(lambda self: self._max_outstanding)
    fifo_depth = property(lambda self: self._fifo_depth)
    memory = property(lambda self: self._memory)
    command_layout = property(lambda self: self._cmd_layout)

    @property
    def page_beats(self):
        """Beats in one 4 KB page: no burst crosses a multiple of it."""
        return self._page_beats

    def _bursts(self, m):
        """The command path: ``cmd`` into the burst splitter, in ``sync``, whose bursts
        cross into ``mem`` (:data:`COMMAND_DEPTH` deep) and wait there in one register,
        taken from the crossing only when empty. The splitter's adds and compares then
        run at the fabric clock; the memory clock (450 MHz on VHK158, 3 levels) holds
        only the channel logic. A burst issues at most every :data:`ISSUE_SPACING`
        cycles, so the register's refill (two cycles) costs nothing."""
        m.submodules.split = split = _BurstSplitter(
            beat_bits=self._beat_bits, max_burst=self._max_burst, page_beats=self._page_beats)
        layout = split.burst.payload.shape()
        m.submodules.cmd_cdc = cmd_cdc = CDCFIFO(
            width=layout.size, depth=COMMAND_DEPTH, w_domain="sync", r_domain="mem")
        wiring.connect(m, wiring.flipped(self.cmd), split.cmd)
        # The mem side's register of the next burst; the master's issue drives ready.
        burst = stream.Signature(layout).create(path=("burst",))
        m.d.comb += [
            cmd_cdc.w_data.eq(split.burst.payload), cmd_cdc.w_en.eq(split.burst.valid),
            split.burst.ready.eq(cmd_cdc.w_rdy),
            cmd_cdc.r_en.eq(~burst.valid),
        ]
        with m.If(~burst.valid & cmd_cdc.r_rdy):
            m.d.mem += [burst.valid.eq(1), burst.payload.eq(cmd_cdc.r_data)]
        with m.Elif(burst.ready):
            m.d.mem += burst.valid.eq(0)
        return burst

    def _name(self, kind):
        return (f"AXI4{kind}Master_a{self._addr_width}_d{self._data_width}_i{self._id_width}"
                f"_b{self._max_burst}_o{self._max_outstanding}_f{self._fifo_depth}")

    @classmethod
    def config_kwargs(cls, config, **overrides):
        """The constructor's keyword arguments for one memory port of ``config``'s board
        (the sizes :meth:`from_config` uses; ``overrides`` replace any), without building
        a master: for a block that builds its own."""
        board = config.board
        kwargs = dict(addr_width=40, data_width=board.memory_port_bits, id_width=1,
                      memory=board.memory)
        kwargs.update(overrides)
        bytes_ = kwargs["data_width"] // 8
        # Bursts of 1 KB, and as many in flight as an HBM_NMU's read reorder buffer
        # holds (4 KB), more than a port keeps in flight at MEMORY_LATENCY_NS.
        kwargs.setdefault("max_burst", min(AXI4_MAX_BURST, PAGE_BYTES // bytes_,
                                           max(1, READ_REORDER_BYTES // 4 // bytes_)))
        kwargs.setdefault("max_outstanding",
                          max(1, READ_REORDER_BYTES // (kwargs["max_burst"] * bytes_)))
        # A read's credit returns only when its beat has crossed into ``sync`` and
        # been taken, so the FIFO covers the latency, one burst and the crossing.
        need = (board.memory_latency_cycles() + kwargs["max_burst"] + CROSSING_CYCLES)
        kwargs.setdefault("fifo_depth", 1 << (need - 1).bit_length())
        return kwargs


def _le(a, b):
    """``a <= b`` as the borrow of ``b - a`` (one bit wider than both): a carry chain,
    where Yosys maps a comparison with a constant to a tree of LUTs a level deeper."""
    return ~(Value.cast(b) - a)[-1]


class _BurstSplitter(wiring.Component):
    """Cuts one command into bursts of at most ``max_burst`` beats, none crossing 4 KB.

    Runs in ``sync``, before the command crossing (:meth:`_Params._bursts`). A command
    is taken into a holding register (a region of 0 beats is dropped there), moves into
    the region registers when the previous region has offered its last burst, and
    ``burst`` offers each burst from an output register.

    Every path is one carry chain and a multiplexer: the three comparisons that
    choose a burst's length (remaining beats ≤ ``max_burst``, beats to the page
    boundary ≤ ``max_burst``, remaining ≤ to the boundary) are registered flags. A
    burst of ``max_burst`` beats moves both counts down by the same amount, so its
    successor's flags are comparisons of the current registers with 2·``max_burst``
    (and the third is unchanged): such bursts leave one per cycle. After a burst to
    the page boundary the flags take one cycle to recompute; the first burst of a
    region has them from the holding register.
    """

    def __init__(self, *, beat_bits, max_burst, page_beats):
        self._beat_bits, self._max_burst, self._page_beats = beat_bits, max_burst, page_beats
        super().__init__({
            "cmd": In(stream.Signature(command_layout(beat_bits))),
            "burst": Out(stream.Signature(data.StructLayout({
                "addr": beat_bits, "beats": range(max_burst + 1), "last": 1}))),
        })

    def elaborate(self, platform):
        m = Module()
        mb, pb = self._max_burst, self._page_beats
        page_bits = (pb - 1).bit_length()
        beats_w = self._beat_bits + 1
        cmd = self.cmd.payload

        # holding register: the command, its distance to the page boundary and flags
        h_valid = Signal()
        h_addr = Signal(self._beat_bits)
        h_beats = Signal(beats_w)
        h_tp = Signal(range(pb + 1))
        h_small = Signal()      # beats <= max_burst
        h_tp_small = Signal()   # beats to the boundary <= max_burst
        h_hi_zero = Signal()    # beats < 2 * page_beats: the bits compared with h_tp
        low = page_bits + 1
        # region registers
        active = Signal()
        cur = Signal(self._beat_bits)
        rem = Signal(beats_w)
        tp = Signal(range(pb + 1))     # beats from cur to the next page boundary (1 ... pb)
        flags_ok = Signal()
        fa = Signal()           # rem <= max_burst
        fb = Signal()           # tp <= max_burst
        fc = Signal()           # rem <= tp
        # output register
        o_valid = Signal()
        o_addr = Signal(self._beat_bits)
        o_beats = Signal(range(mb + 1))
        o_last = Signal()

        load = h_valid & ~active
        m.d.comb += [
            self.cmd.ready.eq(~h_valid | ~active),
            self.burst.valid.eq(o_valid),
            self.burst.payload.addr.eq(o_addr),
            self.burst.payload.beats.eq(o_beats),
            self.burst.payload.last.eq(o_last),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [h_valid.eq(cmd.beats.any()), h_addr.eq(cmd.addr), h_beats.eq(cmd.beats),
                         h_tp.eq(pb - cmd.addr[:page_bits]),
                         h_small.eq(cmd.beats <= mb),
                         h_tp_small.eq(cmd.addr[:page_bits] >= pb - mb),
                         h_hi_zero.eq(~cmd.beats[low:].any())]
        with m.Elif(load):
            m.d.sync += h_valid.eq(0)

        case_r = fa & fc            # the rest of the region: its last burst
        case_t = ~case_r & fb       # to the page boundary
        # (otherwise a burst of max_burst beats). After a last burst the region's
        # registers are not used again, so their next values choose between the
        # other two cases by ``fb`` alone, and both sums are formed in parallel.
        form = active & flags_ok & (~o_valid | self.burst.ready)
        with m.If(form):
            m.d.sync += [o_valid.eq(1), o_addr.eq(cur), o_last.eq(case_r),
                         o_beats.eq(Mux(case_r, rem, Mux(case_t, tp, mb)))]
        with m.Elif(self.burst.ready):
            m.d.sync += o_valid.eq(0)

        with m.If(load):
            m.d.sync += [active.eq(1), cur.eq(h_addr), rem.eq(h_beats), tp.eq(h_tp),
                         flags_ok.eq(1), fa.eq(h_small), fb.eq(h_tp_small),
                         fc.eq(h_hi_zero & _le(h_beats[:low], h_tp))]
        with m.Elif(form):
            m.d.sync += [cur.eq(Mux(fb, cur + tp, cur + mb)),
                         rem.eq(Mux(fb, rem - tp, rem - mb)),
                         tp.eq(Mux(fb, pb, tp - mb)),
                         flags_ok.eq(~fb),
                         fa.eq(_le(rem, 2 * mb)), fb.eq(_le(tp, 2 * mb))]
            with m.If(case_r):
                m.d.sync += active.eq(0)
        with m.Elif(active & ~flags_ok):
            # after a burst to the boundary: tp is a whole page
            m.d.sync += [flags_ok.eq(1), fa.eq(_le(rem, mb)), fb.eq(pb <= mb),
                         fc.eq(_le(rem, pb))]
        return m


def _mem(elaboratable):
    from amaranth.hdl import DomainRenamer
    return DomainRenamer("mem")(elaboratable)


class AXI4ReadMaster(_Params, wiring.Component):
    """AXI4 read master: regions in, an in-order stream of beats out.

    Parameters
    ----------
    addr_width : int
        Byte-address width of ``araddr`` (12 ... 64).
    data_width : int
        Bits per beat; one of :data:`golden.config.MEMORY_PORT_BITS` for
        ``memory`` (an HBM_NMU takes at most 256, an NMU512 512).
    id_width : int
        Width of ``arid``/``rid``. The master uses one ID (0), so the
        subordinate returns bursts in issue order (AMBA AXI4 A5.3.1).
    max_burst : int
        Beats per burst at most (1 ... min(256, 4096 / bytes per beat)).
    max_outstanding : int
        Read bursts in flight at most (issued on AR, last beat not yet received).
    fifo_depth : int
        Beats of the data FIFO, a power of two ≥ ``max_burst``. It is also the
        crossing into ``sync``, and the master issues a burst only when the FIFO
        has room for all of it, counting the beats of bursts in flight.
    memory : str
        ``"HBM"``, ``"DDR"`` or ``"none"``: which port widths are allowed.
    out_width : int or None
        Bits per ``data`` word: ``data_width`` (the default) or a power-of-two
        multiple of it. A fabric clock slower than the memory clock takes a
        port's bandwidth only through a wider word: 256-bit beats at 450 MHz
        need 512-bit words at 250 MHz (``docs/memory.md``).

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout)), domain ``sync``
        A region: ``addr`` is its first beat (byte address ÷ ``data_width / 8``,
        so every region is beat-aligned by construction), ``beats`` its length;
        0 beats is a no-op. Taken into the burst splitter's holding register;
        ``cmd.ready`` is high while it is free or its region is moving into the
        splitter's region registers, so a region waits behind at most one other.
    data : Out(stream.Signature(out_width)), domain ``sync``
        The regions' beats, in command order and address order, packed
        ``out_width / data_width`` to a word, the earliest in the low bits. The
        packing runs across regions: the output is the concatenation of all
        regions, so a region whose length is no multiple of the ratio shares a
        word with the next one, and a last partial word waits for more beats.
        First word falls through: a word is valid :attr:`latency` ``sync``
        cycles (upper bound) after the R handshake of its last beat.
    axi : Out(axi4_read_signature), domain ``mem``
        AR and R. ``rready`` is always high: R never back-pressures the memory.
        ``arsize`` is the bus width, ``arburst`` INCR, ``arcache`` modifiable.
    error : Out(1), domain ``sync``
        Sticky: some R beat came back with ``rresp`` ≠ OKAY.
    overrun : Out(1), domain ``sync``
        Sticky: an R beat found the data FIFO full. The credits make this
        impossible; the benches check it stays low.
    """

    def __init__(self, *, addr_width, data_width, id_width=1, max_burst, max_outstanding,
                 fifo_depth, memory="DDR", out_width=None):
        self._init_params("AXI4ReadMaster", addr_width=addr_width, data_width=data_width,
                          id_width=id_width, max_burst=max_burst, max_outstanding=max_outstanding,
                          fifo_depth=fifo_depth, memory=memory)
        self._out_width, self._ratio = _word_width("AXI4ReadMaster", "out_width", out_width,
                                                   data_width, self._fifo_depth)
        super().__init__({
            "cmd": In(stream.Signature(self._cmd_layout)),
            "data": Out(stream.Signature(self._out_width)),
            "axi": Out(axi4_read_signature(addr_width=self._addr_width,
                                           data_width=self._data_width, id_width=self._id_width)),
            "error": Out(1),
            "overrun": Out(1),
        })

    @classmethod
    def from_config(cls, config, **overrides):
        """The read master of one memory port of ``config``'s board.

        Width and memory kind come from the board; ``max_burst``, ``fifo_depth``
        and ``max_outstanding`` default to the sizes of ``docs/memory.md`` (the
        FIFO holds the 4 KB a port keeps in flight); ``out_width`` to the
        narrowest word that carries the port's beats at the fabric clock (the
        power-of-two multiple of the beat ≥ memory clock ÷ fabric clock).
        ``overrides`` replace any.
        """
        kwargs = cls.config_kwargs(config, **overrides)
        if "out_width" not in kwargs:
            board = config.board
            ratio = 1
            while ratio * board.clock_mhz < board.memory_clock_mhz:
                ratio *= 2
            kwargs["out_width"] = kwargs["data_width"] * ratio
        return cls(**kwargs)

    out_width = property(lambda self: self._out_width)

    @property
    def module_name(self):
        name = self._name("Read")
        return name if self._ratio == 1 else f"{name}_w{self._out_width}"

    @property
    def latency(self):
        """``sync`` edges from the R handshake of a word's last beat to its ``data.valid``, at most.

        The data crossing's (:attr:`hw.cdc_fifo.CDCFIFO.latency`): its write pointer is
        registered on the handshake's own ``mem`` edge, then its synchronizer takes 2
        ``sync`` edges; a third covers the phase between the clocks. Measured by
        ``sim/axi_master.py`` (``read_first_beat_latency``) at the sim preset's clocks: 2.
        """
        return 3

    def elaborate(self, platform):
        m = Module()
        depth = self._fifo_depth
        axi = self.axi

        ratio = self._ratio
        m.submodules.data_cdc = data_cdc = CDCFIFO(
            width=self._out_width, depth=depth // ratio, w_domain="mem", r_domain="sync")
        burst = self._bursts(m)

        m.d.comb += [
            self.data.payload.eq(data_cdc.r_data), self.data.valid.eq(data_cdc.r_rdy),
            data_cdc.r_en.eq(self.data.ready),
        ]

        # Credits, in beats: ``used`` = (w_level + wrote_prev)·ratio + packed +
        # reserved counts the FIFO's words, the beats waiting in the packer and the
        # beats of bursts in flight (reserved = issued - received). An R beat moves
        # from one term to another, so ``used`` grows only at an issue and falls as
        # ``sync`` reads. A burst of L beats may issue while used + L <= depth +
        # ratio - 1: depth - w_level·ratio is a multiple of ratio, so its beats then
        # complete no more words than the FIFO has room for. CDCFIFO's w_level is
        # registered from a registered write pointer, so it omits the word written in
        # the previous cycle: ``wrote_prev`` adds it back. Its read pointer may be a
        # few edges old, so it can count words already read, even past the FIFO's
        # depth: the room is signed, and negative then. The room is computed from
        # one cycle's counters over two registers and compared with the burst in a
        # third (:data:`ISSUE_SPACING`); no burst issues in between, so it is a lower
        # bound of the room at the issue.
        sh = ratio.bit_length() - 1
        cap = depth + ratio - 1
        kb = cap.bit_length()
        ko = self._max_outstanding.bit_length() + 1
        issued = Signal(kb)         # beats of the bursts issued, mod 2**kb
        received = Signal(kb)       # R beats received, mod 2**kb
        bursts = Signal(ko)         # bursts issued, mod 2**ko
        lasts = Signal(ko)          # last beats received, mod 2**ko
        wrote_prev = Signal()
        packed = Signal(range(ratio))       # beats in the packer (``held``)
        length = burst.payload.beats
        words = Cat(packed[:sh], data_cdc.w_level) if sh else data_cdc.w_level
        free1 = Signal(signed(kb + 1))      # cap - (w_level + wrote_prev)·ratio - packed
        reserved1 = Signal(kb)
        outstanding1 = Signal(ko)
        room = Signal(signed(kb + 1))
        out_ok = Signal()
        credit_ok = Signal()        # registered: the burst offered may issue
        issued_recently = Signal(ISSUE_SPACING - 2)
        issue = Signal()
        m.d.mem += [
            free1.eq(Mux(wrote_prev, cap - ratio - words, cap - words)),
            reserved1.eq(issued - received),
            outstanding1.eq(bursts - lasts),
            room.eq(free1 - reserved1),
            out_ok.eq(outstanding1 < self._max_outstanding),
            credit_ok.eq(burst.valid & (length <= room) & out_ok & ~issue
                         & ~issued_recently.any()),
            issued_recently.eq(Cat(issue, issued_recently[:-1])),
        ]
        m.d.comb += [
            issue.eq(burst.valid & credit_ok & (~axi.arvalid | axi.arready)),
            burst.ready.eq(issue),
            axi.arsize.eq(self._size), axi.arburst.eq(BURST_INCR), axi.arid.eq(0),
            axi.arcache.eq(CACHE_MODIFIABLE), axi.arprot.eq(0),
            axi.rready.eq(1),
        ]
        with m.If(issue):
            m.d.mem += [axi.arvalid.eq(1), axi.araddr.eq(burst.payload.addr << self._size),
                        axi.arlen.eq(length - 1), issued.eq(issued + length),
                        bursts.eq(bursts + 1)]
        with m.Elif(axi.arready):
            m.d.mem += axi.arvalid.eq(0)

        r_fire = axi.rvalid
        word_done = Signal()
        if ratio == 1:
            m.d.comb += [data_cdc.w_data.eq(axi.rdata), word_done.eq(r_fire)]
        else:
            # The earlier beats of a word wait in ``held``; the word is written with
            # the beat that completes it.
            held = Signal(self._data_width * (ratio - 1))
            m.d.comb += [data_cdc.w_data.eq(axi.rdata << held.shape().width | held),
                         word_done.eq(r_fire & (packed == ratio - 1))]
            with m.If(r_fire):
                m.d.mem += packed.eq(Mux(packed == ratio - 1, 0, packed + 1))
                for k in range(ratio - 1):
                    # Amaranth writes ``x == 0`` as ``!x``, which Verilator rejects
                    # for a vector (WIDTHTRUNC); ``~x.any()`` is the same test.
                    with m.If(~packed.any() if k == 0 else packed == k):
                        m.d.mem += held[k * self._data_width:(k + 1) * self._data_width].eq(
                            axi.rdata)
        m.d.comb += data_cdc.w_en.eq(word_done)
        m.d.mem += wrote_prev.eq(word_done)
        with m.If(r_fire):
            m.d.mem += received.eq(received + 1)
            with m.If(axi.rlast):
                m.d.mem += lasts.eq(lasts + 1)

        error = Signal()
        overrun = Signal()
        with m.If(r_fire & (axi.rresp != 0)):
            m.d.mem += error.eq(1)
        with m.If(word_done & ~data_cdc.w_rdy):
            m.d.mem += overrun.eq(1)
        m.submodules.error_cdc = FFSynchronizer(error, self.error, o_domain="sync")
        m.submodules.overrun_cdc = FFSynchronizer(overrun, self.overrun, o_domain="sync")
        return m


def _word_width(owner, name, width, data_width, fifo_depth):
    """``(width, ratio)``: a master's fabric-side word, ``data_width`` (``None``) or a
    power-of-two multiple of it up to ``fifo_depth`` beats."""
    if width is None:
        width = data_width
    ratio = width // data_width if isinstance(width, int) else 0
    if (isinstance(width, bool) or not isinstance(width, int) or width != ratio * data_width
            or ratio < 1 or ratio & (ratio - 1) or ratio > fifo_depth):
        raise ValueError(f"{owner}.{name} must be data_width ({data_width}) times a power of "
                         f"two up to fifo_depth ({fifo_depth}), not {width!r}")
    return width, ratio


class AXI4WriteMaster(_Params, wiring.Component):
    """AXI4 write master: regions and their data in, write bursts out.

    Parameters
    ----------
    addr_width, data_width, id_width, max_burst, max_outstanding, memory
        As for :class:`AXI4ReadMaster`; ``max_outstanding`` counts bursts whose
        B response has not come back.
    fifo_depth : int
        Beats of the data FIFO (the crossing from ``sync``), a power of two
        ≥ ``max_burst``. A burst's AW is issued only when all its beats are in
        the FIFO, so W never stalls inside a burst for want of data.
    in_width : int or None
        Bits per ``data`` word: ``data_width`` (the default) or a power-of-two
        multiple of it, whose beats leave the low ones first. As the read master's
        ``out_width``: a fabric clock slower than the memory clock gives a port its
        bandwidth only through a wider word (256-bit beats at 450 MHz take 512-bit words
        at 250 MHz); the crossing carries words and the memory side splits them.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout)), domain ``sync``
        A region, as for the read master (beat-aligned by construction; a
        region of 0 beats is dropped and not counted in ``done``).
    data : In(stream.Signature(in_width)), domain ``sync``
        The regions' beats in command order, ``in_width / data_width`` a word, the
        earliest in the low bits; each fills one whole beat (``wstrb`` all ones). Every
        region is a whole number of words (a word never spans two regions).
    axi : Out(axi4_write_signature), domain ``mem``
        AW, W and B. W follows AW order; ``wlast`` marks each burst's last beat.
        ``bready`` is high unless the crossing of ``done`` is full.
    done : Out(32), domain ``sync``
        Regions whose every burst has its B response, counted since reset. A
        region counts :attr:`latency` ``sync`` cycles (upper bound) after the B
        handshake of its last burst.
    error : Out(1), domain ``sync``
        Sticky: some B came back with ``bresp`` ≠ OKAY.
    """

    def __init__(self, *, addr_width, data_width, id_width=1, max_burst, max_outstanding,
                 fifo_depth, memory="DDR", in_width=None):
        self._init_params("AXI4WriteMaster", addr_width=addr_width, data_width=data_width,
                          id_width=id_width, max_burst=max_burst, max_outstanding=max_outstanding,
                          fifo_depth=fifo_depth, memory=memory)
        self._in_width, self._ratio = _word_width("AXI4WriteMaster", "in_width", in_width,
                                                  data_width, self._fifo_depth)
        super().__init__({
            "cmd": In(stream.Signature(self._cmd_layout)),
            "data": In(stream.Signature(self._in_width)),
            "axi": Out(axi4_write_signature(addr_width=self._addr_width,
                                            data_width=self._data_width, id_width=self._id_width)),
            "done": Out(32),
            "error": Out(1),
        })

    @classmethod
    def from_config(cls, config, **overrides):
        """The write master of one memory port of ``config``'s board (see
        :meth:`AXI4ReadMaster.from_config`)."""
        return cls(**cls.config_kwargs(config, **overrides))

    in_width = property(lambda self: self._in_width)

    @property
    def module_name(self):
        name = self._name("Write")
        return name if self._ratio == 1 else f"{name}_w{self._in_width}"

    @property
    def latency(self):
        """``sync`` edges from a region's last B handshake to ``done`` counting it, at most:
        the crossing of :attr:`AXI4ReadMaster.latency` plus the counter's register."""
        return 4

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        max_out = self._max_outstanding

        ratio = self._ratio
        sh = (ratio - 1).bit_length()
        # The crossing carries words of `ratio` beats (fifo_depth beats in all).
        m.submodules.data_cdc = data_cdc = CDCFIFO(
            width=self._in_width, depth=self._fifo_depth // ratio, w_domain="sync",
            r_domain="mem")
        m.submodules.done_cdc = done_cdc = CDCFIFO(
            width=1, depth=COMMAND_DEPTH, w_domain="mem", r_domain="sync")
        burst = self._bursts(m)
        # Per issued burst: its length for the W engine, and whether it ends its
        # region for the B side. Both drain in AW order (one ID).
        m.submodules.lens = lens = _mem(SyncFIFO(width=8, depth=max_out))
        m.submodules.lasts = lasts = _mem(SyncFIFO(width=1, depth=max_out))

        m.d.comb += [
            data_cdc.w_data.eq(self.data.payload), data_cdc.w_en.eq(self.data.valid),
            self.data.ready.eq(data_cdc.w_rdy),
        ]

        # AW: a burst goes out once its data is in the FIFO (beats written and not yet
        # promised to earlier bursts: r_written - promised; a W beat leaves the FIFO
        # only for a promised burst, so no read needs counting), its bookkeeping has
        # room, and fewer than max_outstanding bursts await B. As in the read master the
        # check is pipelined over registers (:data:`ISSUE_SPACING`): r_written only
        # grows between issues, so the value is a lower bound at the issue.
        depth = self._fifo_depth
        kb = depth.bit_length()
        ko = max_out.bit_length() + 1
        promised = Signal(kb)       # beats of the bursts issued, mod 2**kb
        bursts = Signal(ko)         # bursts issued, mod 2**ko
        answered = Signal(ko)       # B responses, mod 2**ko
        outstanding1 = Signal(ko)
        unpromised = Signal(kb)
        out_ok = Signal()
        data_ok = Signal()          # registered: the burst offered may issue
        issued_recently = Signal(ISSUE_SPACING - 2)
        length = burst.payload.beats
        issue = Signal()
        m.d.mem += [
            outstanding1.eq(bursts - answered),
            # Beats written: the words written, `ratio` beats each.
            unpromised.eq(Cat(C(0, sh), data_cdc.r_written) - promised),
            out_ok.eq(outstanding1 < max_out),
            data_ok.eq(burst.valid & (length <= unpromised) & out_ok & lens.w_rdy
                       & lasts.w_rdy & ~issue & ~issued_recently.any()),
            issued_recently.eq(Cat(issue, issued_recently[:-1])),
        ]
        m.d.comb += [
            issue.eq(burst.valid & data_ok & (~axi.awvalid | axi.awready)),
            burst.ready.eq(issue),
            lens.w_data.eq(length - 1), lens.w_en.eq(issue),
            lasts.w_data.eq(burst.payload.last), lasts.w_en.eq(issue),
            axi.awsize.eq(self._size), axi.awburst.eq(BURST_INCR), axi.awid.eq(0),
            axi.awcache.eq(CACHE_MODIFIABLE), axi.awprot.eq(0),
        ]
        with m.If(issue):
            m.d.mem += [axi.awvalid.eq(1), axi.awaddr.eq(burst.payload.addr << self._size),
                        axi.awlen.eq(length - 1), promised.eq(promised + length),
                        bursts.eq(bursts + 1)]
        with m.Elif(axi.awready):
            m.d.mem += axi.awvalid.eq(0)

        # W: one burst after another with no idle beat between them; the next
        # length loads in the cycle the current burst's last beat moves. ``wlast``
        # is a register, set with the count that reaches the last beat.
        w_active = Signal()
        left = Signal(8)        # beats after the current one in this burst
        w_last = Signal()
        w_fire = Signal()
        # A word's beats leave low first; the word leaves the FIFO with its last beat.
        sub = Signal(range(ratio), name="w_sub")
        word_end = Signal(name="w_word_end")
        beat = Signal(self._data_width, name="w_beat")
        if ratio == 1:
            m.d.comb += beat.eq(data_cdc.r_data)
        else:
            # A full case on the beat index (a shift would be wider than the beat).
            dw = self._data_width
            with m.Switch(sub):
                for k in range(ratio):
                    with m.Case(k):
                        m.d.comb += beat.eq(data_cdc.r_data[k * dw:(k + 1) * dw])
        m.d.comb += [
            axi.wvalid.eq(w_active & data_cdc.r_rdy),
            axi.wdata.eq(beat),
            axi.wstrb.eq(Const(-1, self._bytes)),
            axi.wlast.eq(w_last),
            w_fire.eq(axi.wvalid & axi.wready),
            word_end.eq(sub == ratio - 1 if ratio > 1 else 1),
            data_cdc.r_en.eq(w_fire & word_end),
            lens.r_en.eq(~w_active | (w_fire & w_last)),
        ]
        if ratio > 1:
            with m.If(w_fire):
                m.d.mem += sub.eq(Mux(word_end, 0, sub + 1))
        with m.If(lens.r_en & lens.r_rdy):
            m.d.mem += [w_active.eq(1), left.eq(lens.r_data), w_last.eq(~lens.r_data.any())]
        with m.Elif(w_fire):
            m.d.mem += [left.eq(left - 1), w_last.eq(left == 1)]
            with m.If(w_last):
                m.d.mem += w_active.eq(0)

        # B: a region is done when the response of its last burst arrives.
        b_fire = Signal()
        m.d.comb += [
            axi.bready.eq(done_cdc.w_rdy),
            b_fire.eq(axi.bvalid & axi.bready),
            lasts.r_en.eq(b_fire),
            done_cdc.w_data.eq(1),
            done_cdc.w_en.eq(b_fire & lasts.r_data),
            done_cdc.r_en.eq(1),
        ]
        with m.If(b_fire):
            m.d.mem += answered.eq(answered + 1)
        with m.If(done_cdc.r_rdy):
            m.d.sync += self.done.eq(self.done + 1)

        error = Signal()
        with m.If(b_fire & (axi.bresp != 0)):
            m.d.mem += error.eq(1)
        m.submodules.error_cdc = FFSynchronizer(error, self.error, o_domain="sync")
        return m
