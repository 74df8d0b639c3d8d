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

Here the next pointer and its Gray code are registers of their own, computed a cycle
ahead from registers, so a transfer only selects between two registers:

* ``bin1`` = ``bin + 1`` and ``gry1`` = Gray(``bin + 1``) beside ``bin`` and ``gry``;
  on a transfer ``bin, gry ← bin1, gry1`` and ``bin1, gry1 ← bin1 + 1, Gray(bin1 + 1)``.
* The synchronized pointer is decoded into a register, each bit the XOR of the Gray
  bits at and above it (a tree, not a chain).
* A FIFO of at most :data:`LUTRAM_DEPTH` words is distributed RAM read asynchronously
  at the read pointer's register, so no read decision reaches its address; a deeper one
  is block RAM, whose address input ends the read decision's path.
* ``r_level`` is the decoded write pointer's register minus the read pointer, so it
  lags a write by one more read edge than ``r_rdy``: it never counts a word that is
  not there.

Reset: the write domain's reset empties the FIFO, as Amaranth's ``AsyncFIFO``'s does.
It reaches the read domain through an asynchronous-assert, synchronous-release
synchronizer (``r_rst``). While it is asserted, and one cycle after, the read pointers
are held at 0, where the write pointers restart, and ``r_rdy`` is low and ``r_level``
zero. (``AsyncFIFO`` loads them from the synchronized write pointer instead; by its
code, a word written in the edges before ``r_rst`` falls is then skipped.) The write side
takes no word, and ``w_level`` is zero, until it sees the read pointer at 0 through its
synchronizer, so it never compares with the old one. A read-domain reset alone keeps
the words."""

from amaranth import Cat, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import AsyncFFSynchronizer, FFSynchronizer
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


def _ungray(g):
    # Bit i is the XOR of Gray bits i and above: each its own reduction, which maps to
    # a tree of LUTs (two levels for 9 bits), where a running XOR is a chain.
    return Cat(*(g[i:].xor() for i in range(len(g))))


class CDCFIFO(wiring.Component):
    """First-word-fall-through FIFO from ``w_domain`` to ``r_domain`` (asynchronous clocks).

    The ports are those of Amaranth's ``lib.fifo.AsyncFIFO`` (``w_data``, ``w_en``,
    ``w_rdy``, ``w_level``; ``r_data``, ``r_en``, ``r_rdy``, ``r_level``, ``r_rst``),
    so it replaces one.

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
        synchronized and decoded (two ``w_domain`` edges and the decode's register
        behind the reads), so it omits a word written in the previous cycle and counts
        words already read as held; never more than ``depth``.
    r_data, r_rdy : Out
        ``r_rdy`` (not empty: the read pointer's Gray code against the synchronized
        write pointer's, both registers) rises at most :attr:`latency` ``r_domain``
        edges after the write edge; ``r_data`` is the word at the read pointer while
        ``r_rdy`` is high.
    r_en : In(1)
        The word is taken on an ``r_domain`` edge with ``r_en`` and ``r_rdy`` high.
    r_level : Out(range(depth + 1))
        Words that are surely there: the synchronized write pointer, decoded into a
        register, minus the read pointer; at most the words ``r_rdy`` shows, never
        negative.
    r_rst : Out(1)
        High in the read domain while the write domain's reset reaches it.

    Notes
    -----
    After a write-domain reset ``w_rdy`` stays low until the read side's reset pointer
    has crossed back (about two edges of each clock after ``r_rst`` rose).
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
            "r_level": Out(range(self._depth + 1)), "r_rst": Out(1),
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
        c_w_gry = Signal(bits)                   # the read pointer, synchronized
        c_w_bin = Signal(bits)
        m.submodules.consume_cdc = FFSynchronizer(r_gry, c_w_gry, o_domain=self._w)
        # After a write-domain reset the read pointer returns to 0 through the read side's
        # r_rst and the synchronizer: until this side sees it there, the synchronized value
        # is the old pointer (or bits of both) and neither full nor w_level can use it.
        w_wait = Signal(init=1)
        w += w_wait.eq(w_wait & c_w_gry.any())
        full = Signal()
        m.d.comb += [
            full.eq(w_wait | ((w_gry[-1] != c_w_gry[-1]) & (w_gry[-2] != c_w_gry[-2])
                              & (w_gry[:-2] == c_w_gry[:-2]))),
            self.w_rdy.eq(~full),
        ]
        do_write = self.w_en & ~full
        with m.If(do_write):
            w += [w_bin.eq(w_bin1), w_gry.eq(w_gry1),
                  w_bin1.eq(_succ(w_bin1)), w_gry1.eq(_gray(_succ(w_bin1)))]
        w += [c_w_bin.eq(_ungray(c_w_gry)),
              self.w_level.eq(Mux(w_wait, 0, w_bin - c_w_bin))]

        # ---- read side (its pointers are reset through r_rst, not the read domain's
        # reset: a read-domain reset alone keeps the FIFO's words, as AsyncFIFO's) ----
        r_bin = Signal(bits, reset_less=True)
        r_bin1 = Signal(bits, init=1, reset_less=True)
        r_gry1 = Signal(bits, init=1, reset_less=True)
        p_r_gry = Signal(bits)                   # the write pointer, synchronized
        m.submodules.produce_cdc = FFSynchronizer(w_gry, p_r_gry, o_domain=self._r)
        p_r_bin = Signal(bits, reset_less=True)  # its decode, a cycle later
        r += p_r_bin.eq(_ungray(p_r_gry))

        rst_w = ResetSignal(self._w, allow_reset_less=True)
        m.submodules.rst_cdc = AsyncFFSynchronizer(rst_w, self.r_rst, o_domain=self._r)
        # The write side restarts at 0, so the read side does too: while r_rst (and a
        # cycle after it, until p_r_bin is a decode of a clean pointer) the pointers are
        # held at 0 and the reader sees nothing. A word written meanwhile (the write
        # side leaves its reset 2 edges before r_rst falls) is read after it, not skipped.
        init = Signal()
        r += init.eq(self.r_rst)
        blocked = self.r_rst | init
        empty = Signal()
        m.d.comb += [empty.eq(blocked | (r_gry == p_r_gry)), self.r_rdy.eq(~empty),
                     self.r_level.eq(Mux(blocked, 0, p_r_bin - r_bin))]
        do_read = self.r_en & ~empty
        with m.If(blocked):
            r += [r_bin.eq(0), r_gry.eq(0), r_bin1.eq(1), r_gry1.eq(1)]
        with m.Elif(do_read):
            r += [r_bin.eq(r_bin1), r_gry.eq(r_gry1),
                  r_bin1.eq(_succ(r_bin1)), r_gry1.eq(_gray(_succ(r_bin1)))]

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
