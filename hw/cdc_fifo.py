"""``CDCFIFO``: a clock-crossing FIFO whose every stage is at most a few logic levels deep.

The AXI4 masters (:mod:`hw.axi_master`) cross commands and data between the fabric clock
and the memory clock. The crossing is Cummings' style #2 ("Simulation and Synthesis
Techniques for Asynchronous FIFO Design", SNUG 2002), as in Amaranth's ``AsyncFIFO``:
each side keeps a binary pointer one bit wider than the address, sends its Gray code
through a two-flop synchronizer, and compares Gray codes for full and empty. Amaranth's
``AsyncFIFO`` computes a pointer's next Gray code from its incremented binary value in
the cycle of the transfer (compare, enable, add, encode) and decodes the synchronized
pointer as a chain of XORs; on the UltraScale+ proxy of ``docs/estimate.md`` those paths
take 6.1 and 7 levels inside each master, over the 4 levels of VCK190's 400 MHz.

Here every stage is a register or two levels of logic in front of one:

* ``bin1`` = ``bin + 1`` and ``gry1`` = Gray(``bin + 1``) are registers beside ``bin``
  and ``gry``, computed a cycle ahead; on a transfer ``bin, gry ← bin1, gry1`` and
  ``bin1, gry1 ← bin1 + 1, Gray(bin1 + 1)``.
* ``full`` and ``empty`` come from registers: each side compares both pointers the
  next edge may hold (its own and its successor) with the synchronizer's first flop,
  which the second takes at that edge, and registers whether it moved; ``full`` is
  the comparison it took. The values are those of ``AsyncFIFO``'s comparisons on the
  same edges, so ``w_rdy`` and ``r_rdy`` keep its timing, a transfer decision is one
  or two levels from registers, and the comparisons end in registers.
* The synchronized pointer is decoded into a register, each bit the XOR of the Gray
  bits at and above it; a pointer of more than 3 bits (a FIFO of 8 words or more) is
  decoded over two registers, as ABC shares the XORs of a one-stage decode into a
  chain.
* A FIFO of at most :data:`LUTRAM_DEPTH` words is distributed RAM read asynchronously
  at the read pointer's register, so no read decision reaches its address; a deeper one
  is block RAM, whose address input ends the read decision's path.
* The read side offers the write count, decoded (``r_written``), not ``AsyncFIFO``'s
  ``r_level``: with the decode two registers behind the synchronizer, the read pointer
  can be ahead of it, and a difference would go negative. A reader that counts its own
  reads subtracts them (the write master's ``promised``, :mod:`hw.axi_master`).
  ``w_level`` is kept: the decoded read pointer only lags, so it only over-counts.

Reset: the write domain's reset empties the FIFO, as Amaranth's ``AsyncFIFO``'s does.
It reaches the read domain through an asynchronous-assert, synchronous-release
synchronizer (``r_rst``). While it is asserted, and a cycle after it for each of the
decode's registers, the read pointers are held at 0, where the write pointers restart,
``r_rdy`` is low and ``r_written`` zero. (``AsyncFIFO`` loads them from the
synchronized write pointer instead; by its code, a word written in the edges before
``r_rst`` falls is then skipped.) The write side takes no word until it sees the read
pointer at 0 through its synchronizer, and ``w_level`` is zero until the decode has it
too, so neither compares with the old one. A read-domain reset alone keeps the words."""

from amaranth import Cat, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import AsyncFFSynchronizer
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int

__all__ = ["CDCFIFO", "LUTRAM_DEPTH"]

#: The deepest FIFO kept in distributed RAM (RAM64M8, or two RAM32M16, a few bits a LUT):
#: deeper ones take block RAM, whose read is registered.
LUTRAM_DEPTH = 64


def _gray(v):
    return v ^ v[1:]


def _succ(v):
    # v + 1 wrapping at v's width (Amaranth's sum is one bit wider, and the Gray code of
    # the wider sum would differ at the wrap).
    return (v + 1)[:len(v)]


#: Gray bits decoded in one register stage; a wider pointer takes two stages.
DECODE_GROUP = 3


def _full(w_gry, r_gry):
    # Cummings: full when the pointers differ in their two top bits and agree below.
    return ((w_gry[-1] != r_gry[-1]) & (w_gry[-2] != r_gry[-2])
            & (w_gry[:-2] == r_gry[:-2]))


def _synchronizer(m, domain, i, name):
    """Two flops of ``domain`` after ``i`` (from another clock): returns both, the
    first for logic that computes what the second will hold. As Amaranth's
    ``FFSynchronizer`` without a platform (``reset_less`` flops), with Vivado's
    ``ASYNC_REG`` on both so placement keeps them together."""
    flops = [Signal(len(i), name=f"{name}_stage{k}", reset_less=True,
                    attrs={"ASYNC_REG": "TRUE"}) for k in range(2)]
    m.d[domain] += [flops[0].eq(i), flops[1].eq(flops[0])]
    return flops


def _advance(stmts, bin_, gry, bin1, gry1):
    """A pointer's step: ``bin, gry`` take the registered successor ``bin1, gry1``, and
    those the one after it, so a transfer only selects between registers."""
    stmts += [bin_.eq(bin1), gry.eq(gry1), bin1.eq(_succ(bin1)), gry1.eq(_gray(_succ(bin1)))]


def _ungray(m, domain, g, name, clear=None):
    """The binary value of Gray code ``g``, in registers of ``domain``: one stage when
    ``g`` is at most :data:`DECODE_GROUP` bits, two when wider. Bit i is the XOR of Gray bits i and
    above. However it is written, Yosys' ABC shares these XORs into a chain of 2-input
    LUTs (a 10-bit decode in one stage, or 6-bit groups in two, measured 4 levels on
    the proxy of ``docs/estimate.md``, over the 3 of a 450 MHz memory clock), so the
    decode is cut where a chain stays within 2 levels: the first stage XORs each bit
    with the bits above it in its group of 3 and keeps each group's parity; the second
    XORs in the parities of the groups above (at most 3 up to 12 bits, a FIFO of 2,048
    words; a wider pointer decodes as correctly, over a longer chain). Returns the last
    register, which holds 0 at an edge where ``clear`` is high (a synchronous reset)."""
    n = len(g)
    out = Signal(n, name=name, reset_less=True)

    def last(value):
        m.d[domain] += out.eq(value if clear is None else Mux(clear, 0, value))
        return out

    if n <= DECODE_GROUP:
        return last(Cat(*(g[i:].xor() for i in range(n))))
    part = Signal(n, name=name + "_part", reset_less=True)
    groups = [(max(0, hi - DECODE_GROUP), hi) for hi in range(n, 0, -DECODE_GROUP)]
    bits, above = [], []
    for lo, hi in groups:
        for i in range(lo, hi):
            m.d[domain] += part[i].eq(g[i:hi].xor())
        bits[:0] = [Cat(part[i], *(part[a] for a in above)).xor() for i in range(lo, hi)]
        above.append(lo)        # part[lo] is the group's parity
    return last(Cat(*bits))


class CDCFIFO(wiring.Component):
    """First-word-fall-through FIFO from ``w_domain`` to ``r_domain`` (asynchronous clocks).

    The ports are those of Amaranth's ``lib.fifo.AsyncFIFO`` (``w_data``, ``w_en``,
    ``w_rdy``, ``w_level``; ``r_data``, ``r_en``, ``r_rdy``, ``r_rst``) with their
    timing, but for ``r_level``, replaced by ``r_written`` (module docstring).

    Parameters
    ----------
    width : int
        Bits per word (≥ 1).
    depth : int
        Words held: a power of two, ≥ 2 (the pointers wrap at ``2·depth``).
    w_domain, r_domain : str
        The write and the read clock domain.

    Attributes
    ----------
    w_data, w_en : In
        A word is written on a ``w_domain`` edge with ``w_en`` and ``w_rdy`` high.
    w_rdy : Out(1)
        Not full, from registers (the write pointer's Gray code and the synchronized
        read pointer's).
    w_level : Out(range(depth + 1))
        Registered: the write pointer of the previous cycle minus the read pointer
        synchronized and decoded (two ``w_domain`` edges and the decode's
        :attr:`decode_stages` registers behind the reads), so it omits a word written
        in the previous cycle and counts words already read as held. With a
        two-register decode the read pointer is older than the full flag's, so it
        can exceed ``depth`` by the words read in the last edges (it stays below
        ``2·depth``, the port's range).
    r_data, r_rdy : Out
        ``r_rdy`` (not empty: the read pointer's Gray code against the synchronized
        write pointer's, from registers) rises at most :attr:`latency` ``r_domain``
        edges after the write edge; ``r_data`` is the word at the read pointer while
        ``r_rdy`` is high.
    r_en : In(1)
        The word is taken on an ``r_domain`` edge with ``r_en`` and ``r_rdy`` high.
    r_written : Out(log2(depth) + 1)
        Words written, modulo ``2·depth``, as far as the read side surely knows: the
        synchronized write pointer decoded into :attr:`decode_stages` registers, so it
        lags ``r_rdy``'s view by that many ``r_domain`` edges; never ahead of the
        writes. 0 after a write-domain reset, where the write pointer restarts.
    r_rst : Out(1)
        High in the read domain while the write domain's reset reaches it.

    Notes
    -----
    After a write-domain reset ``w_rdy`` stays low until the read side's reset pointer
    has crossed back and been decoded (about two edges of each clock after ``r_rst``
    rose, and :attr:`decode_stages` edges).
    """

    def __init__(self, *, width, depth, w_domain="write", r_domain="read"):
        self._width = check_int("CDCFIFO", "width", width, min=1)
        self._depth = check_int("CDCFIFO", "depth", depth, min=2)
        if depth & (depth - 1):
            raise ValueError(f"CDCFIFO.depth must be a power of two >= 2, not {depth}")
        for name, dom in (("w_domain", w_domain), ("r_domain", r_domain)):
            if not isinstance(dom, str) or not dom:
                raise TypeError(f"CDCFIFO.{name} must be a clock domain name, not {dom!r}")
        if w_domain == r_domain:
            raise ValueError(f"CDCFIFO.r_domain must differ from w_domain ({w_domain!r}): "
                             f"within one domain use a synchronous FIFO")
        self._w, self._r = w_domain, r_domain
        super().__init__({
            "w_data": In(self._width), "w_en": In(1), "w_rdy": Out(1),
            "w_level": Out(range(self._depth + 1)),
            "r_data": Out(self._width), "r_en": In(1), "r_rdy": Out(1),
            "r_written": Out(self._depth.bit_length()), "r_rst": Out(1),
        })

    @property
    def width(self):
        return self._width

    @property
    def depth(self):
        return self._depth

    @property
    def lutram(self):
        """Whether the storage is distributed RAM read asynchronously (at most
        :data:`LUTRAM_DEPTH` words): ``r_data`` is then the RAM's output, with no
        register of its own. Deeper FIFOs read block RAM on the read clock's edge."""
        return self._depth <= LUTRAM_DEPTH

    @property
    def decode_stages(self):
        """Registers from a synchronized Gray pointer to its binary decode, which
        ``r_written`` and ``w_level`` use: 1, or 2 when the pointer (log2(``depth``) + 1
        bits) is wider than :data:`DECODE_GROUP` (``depth`` ≥ 8)."""
        return 1 if self._depth.bit_length() <= DECODE_GROUP else 2

    @property
    def latency(self):
        """``r_domain`` edges from the write edge to ``r_rdy``, at most: the Gray
        register's output settles after the write edge, the synchronizer takes two
        edges, and a third covers the phase between the clocks (as ``AsyncFIFO``)."""
        return 3

    def elaborate(self, platform):
        m = Module()
        bits = self._depth.bit_length()          # log2(depth) + 1
        w, r = m.d[self._w], m.d[self._r]

        # The read pointer's Gray code: a read-domain register, reset through r_rst.
        r_gry = Signal(bits, reset_less=True)

        # ---- write side ----
        w_bin, w_gry = Signal(bits), Signal(bits)
        w_bin1, w_gry1 = Signal(bits, init=1), Signal(bits, init=1)   # Gray(1) = 1
        # The read pointer through two flops (Cummings' synchronizer, written out: the
        # registered full below compares with the first flop, the value the second
        # takes at the next edge).
        c_s0, c_w_gry = _synchronizer(m, self._w, r_gry, "consume")
        # After a write-domain reset the read pointer returns to 0 through the read side's
        # r_rst and the synchronizer: until this side sees it there, the synchronized value
        # is the old pointer (or bits of both) and neither full nor w_level can use it.
        # The decode lags c_w_gry by its stages, so the wait lasts as many edges more
        # (the extra edges hold w_wait's past values): no word is written, and w_level
        # is 0, until the decoded pointer is clean too.
        w_wait = Signal(init=1)
        w += w_wait.eq(w_wait & c_w_gry.any())
        w_block = w_wait
        if self.decode_stages > 1:
            w_wait_d = Signal(self.decode_stages - 1, init=-1)
            w += w_wait_d.eq(Cat(w_wait, w_wait_d[:-1]))
            w_block = w_wait | w_wait_d.any()
        # full from registers: both pointers the next edge may hold, each compared with
        # the synchronizer's first flop (the value its second takes at that edge), and
        # which of them it took: a write decision is one level from registers, and the
        # comparisons (three levels for a 10-bit pointer) end in registers.
        full_stay, full_move, wrote = Signal(), Signal(), Signal()
        full = Mux(wrote, full_move, full_stay)
        do_write = self.w_en & ~w_block & ~full
        w += [full_stay.eq(_full(w_gry, c_s0)), full_move.eq(_full(w_gry1, c_s0)),
              wrote.eq(do_write)]
        m.d.comb += self.w_rdy.eq(~w_block & ~full)
        with m.If(do_write):
            _advance(w, w_bin, w_gry, w_bin1, w_gry1)
        c_w_bin = _ungray(m, self._w, c_w_gry, "c_w_bin")
        w += self.w_level.eq(Mux(w_block, 0, w_bin - c_w_bin))

        # ---- read side (its pointers are reset through r_rst, not the read domain's
        # reset: a read-domain reset alone keeps the FIFO's words, as AsyncFIFO's) ----
        r_bin = Signal(bits, reset_less=True)
        r_bin1 = Signal(bits, init=1, reset_less=True)
        r_gry1 = Signal(bits, init=1, reset_less=True)
        p_s0, p_r_gry = _synchronizer(m, self._r, w_gry, "produce")

        rst_w = ResetSignal(self._w, allow_reset_less=True)
        m.submodules.rst_cdc = AsyncFFSynchronizer(rst_w, self.r_rst, o_domain=self._r)
        # The write side restarts at 0, so the read side does too: while r_rst (and the
        # decode's stages after it, until r_written is a decode of a clean pointer) the
        # pointers are held at 0 and the reader sees nothing. A word written meanwhile
        # (the write side leaves its reset 2 edges before r_rst falls) is read after
        # it, not skipped.
        init = Signal(self.decode_stages)
        r += init.eq(Cat(self.r_rst, init[:-1]))
        blocked = self.r_rst | init.any()
        # empty from registers, as full. While blocked the read pointer goes to 0 and
        # nothing is read, and blocked lasts at least two edges, so at its last edge
        # the comparison is already with 0. (Reset-less: a read-domain reset alone
        # keeps the words.)
        empty_stay = Signal(init=1, reset_less=True)
        empty_move = Signal(reset_less=True)
        took = Signal(reset_less=True)
        empty = blocked | Mux(took, empty_move, empty_stay)
        do_read = self.r_en & ~empty
        r += [empty_stay.eq(r_gry == p_s0), empty_move.eq(r_gry1 == p_s0), took.eq(do_read)]
        m.d.comb += self.r_rdy.eq(~empty)
        # The write count, decoded; zero while blocked (a synchronous reset of its last
        # register, so the gate takes no level).
        p_r_bin = _ungray(m, self._r, p_r_gry, "p_r_bin", clear=blocked)
        m.d.comb += self.r_written.eq(p_r_bin)
        with m.If(blocked):
            r += [r_bin.eq(0), r_gry.eq(0), r_bin1.eq(1), r_gry1.eq(1)]
        with m.Elif(do_read):
            _advance(r, r_bin, r_gry, r_bin1, r_gry1)

        # ---- storage: written in w_domain, read in r_domain ----
        m.submodules.storage = mem = Memory(shape=self._width, depth=self._depth, init=[])
        wp = mem.write_port(domain=self._w)
        m.d.comb += [wp.addr.eq(w_bin[:-1]), wp.data.eq(self.w_data), wp.en.eq(do_write)]
        if self.lutram:
            # Distributed RAM reads asynchronously: the word at the read pointer's
            # register, so no read decision reaches the address.
            rp = mem.read_port(domain="comb")
            m.d.comb += [rp.addr.eq(r_bin[:-1]), self.r_data.eq(rp.data)]
        else:
            # Block RAM reads on the clock edge: the word at the pointer the next edge
            # holds (its address input ends the read decision's path).
            rp = mem.read_port(domain=self._r)
            m.d.comb += [rp.addr.eq(Mux(do_read, r_bin1, r_bin)[:-1]), rp.en.eq(1),
                         self.r_data.eq(rp.data)]
        return m
