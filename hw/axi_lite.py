"""AXI4-Lite slave register file generated from a :class:`hw.regmap.RegisterMap`.

The accelerator's control and status registers (:func:`hw.regmap.accelerator_regmap`)
are reached from the host over AXI4-Lite; this component is their RTL, built
from the same description as the Markdown table and the C header.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int

from .regmap import RegisterMap

__all__ = ["AXI4LiteSignature", "AXI4LiteRegisterFile", "RESP_OKAY", "RESP_SLVERR"]

RESP_OKAY = 0b00
RESP_SLVERR = 0b10


class AXI4LiteSignature(wiring.Signature):
    """AXI4-Lite, from the manager's side (flip it for a subordinate).

    Members are the AMBA signal names in lower case (``awaddr``, ``wstrb``,
    ``bresp``, ...), so a port ``s_axi`` appears in Verilog as
    ``s_axi__awaddr`` and so on; :func:`gen.emit.vivado.bus_interfaces` maps those
    to an IP Integrator ``aximm`` interface.

    Parameters
    ----------
    addr_width : int
        Byte-address bits (≥ 2).
    data_width : int
        32 or 64 (AXI4-Lite allows both).
    """

    def __init__(self, *, addr_width, data_width=32):
        self._addr_width = check_int("AXI4LiteSignature", "addr_width", addr_width, min=2, max=64)
        if data_width not in (32, 64) or isinstance(data_width, bool):
            raise ValueError(f"AXI4LiteSignature.data_width must be 32 or 64, not {data_width!r}")
        self._data_width = data_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width

    def __eq__(self, other):
        return (isinstance(other, AXI4LiteSignature) and other.addr_width == self.addr_width
                and other.data_width == self.data_width)

    def __hash__(self):
        return hash((AXI4LiteSignature, self._addr_width, self._data_width))

    def __repr__(self):
        return f"AXI4LiteSignature(addr_width={self._addr_width}, data_width={self._data_width})"


def field_port_name(register, field):
    """Name of the hardware-side port of ``field`` of ``register``: ``<reg>_<field>`` in lower case."""
    return f"{register.name.lower()}_{field.name.lower()}"


class AXI4LiteRegisterFile(wiring.Component):
    """AXI4-Lite subordinate holding the registers of ``regmap``.

    Parameters
    ----------
    regmap : hw.regmap.RegisterMap
        The registers; every field gets a hardware-side port named
        ``<register>_<field>`` in lower case (:func:`field_port_name`).

    Attributes
    ----------
    s_axi : In(AXI4LiteSignature(addr_width=regmap.addr_width))
        The bus: 32-bit data, one outstanding write and one outstanding read.
        Registers are decoded from the word address (``addr[1:0]`` ignored).
        A write or read to an address no register occupies completes with
        ``SLVERR`` and has no effect; a write to read-only fields is ignored
        with ``OKAY``. ``wstrb`` selects the bytes a write changes, for every
        access kind. ``awprot``/``arprot`` are ignored.
    <reg>_<field> (RW) : Out(width)
        The stored value.
    <reg>_<field> (RO) : In(width)
        Driven by the hardware; sampled in the cycle the read address is accepted.
    <reg>_<field> (WO) : Out(width)
        High for exactly one cycle (the first cycle of ``bvalid``) on every
        bit written as 1.
    <reg>_<field> (W1C) : Out(width), and <reg>_<field>_set : In(width)
        Sticky bits: a 1 on ``_set`` sets the bit in the next cycle; writing 1
        clears it. A set and a clear in the same cycle leave it set (the event
        is never lost).
    <reg>_addr : In(range(count)), <reg>_<field> : Out(width) (tables)
        A read port into a table register: the entry at ``<reg>_addr``,
        combinationally (LUT RAM). Table entries power up as 0 and are not
        cleared by reset.

    Notes
    -----
    Timing, write: ``awready``/``wready`` are high while the channel's buffer
    is empty and no response is pending; each channel's beat is buffered on
    its own handshake, in either order. In the first cycle with both buffered
    the write commits: from the next cycle on the new values show on the RW
    ports, the WO pulses are high (for that one cycle) and ``bvalid`` is high,
    held until ``bready``. Read: ``arready`` is high while no read response is
    pending; ``rvalid`` rises in the cycle after the address handshake, held
    with ``rdata``/``rresp`` until ``rready``.
    No ready depends combinationally on a valid.
    """

    def __init__(self, *, regmap):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"AXI4LiteRegisterFile.regmap must be a hw.regmap.RegisterMap, "
                            f"not {regmap!r}")
        self._regmap = regmap
        members = {"s_axi": In(AXI4LiteSignature(addr_width=regmap.addr_width))}

        def add(name, member):
            if name in members or name in ("clk", "rst"):
                raise ValueError(f"AXI4LiteRegisterFile: port name {name!r} collides; rename "
                                 "the register or field")
            members[name] = member

        for reg in regmap.registers:
            if reg.count > 1:
                add(f"{reg.name.lower()}_addr", In(range(reg.count)))
            for f in reg.fields:
                name = field_port_name(reg, f)
                if reg.count > 1 or f.access == "WO":
                    add(name, Out(f.width))
                elif f.access == "RW":
                    add(name, Out(f.width, init=f.reset))
                elif f.access == "RO":
                    add(name, In(f.width))
                elif f.access == "W1C":
                    add(name, Out(f.width, init=f.reset))
                    add(f"{name}_set", In(f.width))
        super().__init__(members)

    @property
    def regmap(self):
        return self._regmap

    @property
    def latency(self):
        """Cycles from the read-address handshake to ``rvalid``."""
        return 1

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axi
        rm = self._regmap
        word_bits = rm.addr_width - 2

        # --- write channel: buffer AW and W, commit, respond ---
        aw_full = Signal()
        aw_word = Signal(word_bits)
        w_full = Signal()
        w_data = Signal(32)
        w_strb = Signal(4)
        m.d.comb += [bus.awready.eq(~aw_full & ~bus.bvalid),
                     bus.wready.eq(~w_full & ~bus.bvalid)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_full.eq(1), aw_word.eq(bus.awaddr[2:])]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        commit = Signal()
        m.d.comb += commit.eq(aw_full & w_full)
        with m.If(commit):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        byte_mask = Signal(32)
        m.d.comb += byte_mask.eq(Cat(*[b.replicate(8) for b in w_strb]))
        written = Signal(32)  # data bits that a write sets (strobed and 1)
        m.d.comb += written.eq(w_data & byte_mask)

        # --- read channel: decode in the address cycle, hold the response ---
        ar_fire = Signal()
        ar_word = Signal(word_bits)
        m.d.comb += [bus.arready.eq(~bus.rvalid), ar_fire.eq(bus.arvalid & bus.arready),
                     ar_word.eq(bus.araddr[2:])]
        with m.If(ar_fire):
            m.d.sync += bus.rvalid.eq(1)
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)

        w_hits = []
        reads = []
        for reg in rm.registers:
            base = reg.offset >> 2
            words = list(range(base, base + reg.count))
            w_sel = Signal(name=f"{reg.name.lower()}_wsel")
            m.d.comb += w_sel.eq(_in_range(aw_word, base, reg.count))
            if reg.count > 1:
                read_value = self._table(m, reg, commit & w_sel, aw_word - base, ar_word - base,
                                         byte_mask, w_data)
            else:
                read_value = self._register(m, reg, commit & w_sel, byte_mask, w_data, written)
            w_hits.append(w_sel)
            reads.append((words, read_value))
        w_hit = Signal()
        m.d.comb += w_hit.eq(Cat(*w_hits).any())

        with m.If(commit):
            m.d.sync += bus.bresp.eq(RESP_OKAY)
            with m.If(~w_hit):
                m.d.sync += bus.bresp.eq(RESP_SLVERR)
        with m.If(ar_fire):
            with m.Switch(ar_word):
                for words, value in reads:
                    with m.Case(*words):
                        m.d.sync += [bus.rdata.eq(value), bus.rresp.eq(RESP_OKAY)]
                with m.Default():
                    m.d.sync += [bus.rdata.eq(0), bus.rresp.eq(RESP_SLVERR)]
        return m

    def _register(self, m, reg, write, byte_mask, w_data, written):
        """Logic of one plain register; returns its 32-bit read value."""
        parts = []
        for f in reg.fields:
            port = getattr(self, field_port_name(reg, f), None)
            sl = slice(f.lsb, f.lsb + f.width)
            if f.access == "CONST":
                value = Const(f.reset, f.width)
            elif f.access == "RO":
                value = port
            elif f.access == "RW":
                with m.If(write):
                    m.d.sync += port.eq((port & ~byte_mask[sl]) | (w_data[sl] & byte_mask[sl]))
                value = port
            elif f.access == "WO":
                m.d.sync += port.eq(0)
                with m.If(write):
                    m.d.sync += port.eq(written[sl])
                value = Const(0, f.width)
            else:  # W1C
                sets = getattr(self, f"{field_port_name(reg, f)}_set")
                cleared = Signal(f.width, name=f"{field_port_name(reg, f)}_clr")
                m.d.comb += cleared.eq(Const(0, f.width))
                with m.If(write):
                    m.d.comb += cleared.eq(written[sl])
                m.d.sync += port.eq((port & ~cleared) | sets)
                value = port
            parts.append((f.lsb, value))
        return _assemble(parts)

    def _table(self, m, reg, write, w_index, r_index, byte_mask, w_data):
        """A table register in LUT RAM; returns the read value at ``r_index``."""
        top = max(f.msb for f in reg.fields) + 1
        width = -(-top // 8) * 8  # byte granularity, so wstrb maps onto write enables
        name = reg.name.lower()
        mem = Memory(shape=width, depth=reg.count, init=[])
        m.submodules[f"{name}_mem"] = mem
        wr = mem.write_port(granularity=8)
        bus_rd = mem.read_port(domain="comb")
        hw_rd = mem.read_port(domain="comb")
        m.d.comb += [
            wr.addr.eq(w_index), wr.data.eq(w_data[:width]),
            wr.en.eq(Cat(*[byte_mask[8 * i] & write for i in range(width // 8)])),
            bus_rd.addr.eq(r_index),
            hw_rd.addr.eq(getattr(self, f"{name}_addr")),
        ]
        parts = []
        for f in reg.fields:
            m.d.comb += getattr(self, field_port_name(reg, f)).eq(hw_rd.data[f.lsb:f.lsb + f.width])
            parts.append((f.lsb, bus_rd.data[f.lsb:f.lsb + f.width]))
        return _assemble(parts)


def _in_range(word, base, count):
    """``base <= word < base + count``, written so that no comparison is with 0.

    Yosys writes ``x == 0`` as ``!x``, which Verilator's lint rejects (WIDTHTRUNC).
    """
    low = Const(1) if base == 0 else word >= base
    if count == 1:
        return ~word.any() if base == 0 else word == base
    return low & (word < base + count)


def _assemble(parts):
    """32-bit value with each ``(lsb, value)`` in place and zeros elsewhere."""
    pieces, pos = [], 0
    for lsb, value in sorted(parts, key=lambda p: p[0]):
        if lsb > pos:
            pieces.append(Const(0, lsb - pos))
        pieces.append(value)
        pos = lsb + len(value)
    if pos < 32:
        pieces.append(Const(0, 32 - pos))
    return Cat(*pieces)
