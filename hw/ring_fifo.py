"""``RingFIFO``: the ring buffer of SpecMamba's FIFO tree verification.

SpecMamba verifies a draft tree breadth-first; a node's state is its parent's
state advanced by one token, so a parent slot is released once its last child
is computed. The live slots form a FIFO, kept here as a ring buffer of
``depth`` entries. The SpecMamba notes (``docs/sources.md``) size it at
``fifo_depth 16``.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int

__all__ = ["RingFIFO"]


class RingFIFO(wiring.Component):
    """First-word-fall-through ring-buffer FIFO of any depth ≥ 1.

    Parameters
    ----------
    width : int
        Bits per item (≥ 1).
    depth : int
        Items it holds (≥ 1; need not be a power of two).

    Attributes
    ----------
    w : In(stream.Signature(width))
        Write port. ``w.ready`` is high whenever ``level < depth``; it does not
        depend on ``r.ready``, so no combinational path crosses the FIFO.
    r : Out(stream.Signature(width))
        Read port, first-word-fall-through: an item written in cycle *t*
        shows on ``r.payload`` with ``r.valid`` high in cycle *t + 1*
        (:attr:`latency`).
    level : Out(range(depth + 1))
        Items held, registered: it counts the transfers of earlier cycles.
    peak_level : Out(range(depth + 1))
        The highest ``level`` since reset; tree verification reports its
        on-chip state memory from it.

    Notes
    -----
    One write and one read complete in the same cycle whenever the FIFO is
    neither full nor empty, so a streaming producer and consumer run at one
    item per cycle. Storage is an asynchronous-read memory (LUTRAM on Versal):
    the ring holds state-slot indices and tile descriptors, a few bits by
    ``fifo_depth`` entries, where a block RAM would waste a whole tile.
    A synchronous reset empties the FIFO and clears ``peak_level``; a
    transfer in the reset cycle is void.
    """

    def __init__(self, *, width, depth):
        self._width = check_int("RingFIFO", "width", width, min=1)
        self._depth = check_int("RingFIFO", "depth", depth, min=1)
        super().__init__({
            "w": In(stream.Signature(self._width)),
            "r": Out(stream.Signature(self._width)),
            "level": Out(range(self._depth + 1)),
            "peak_level": Out(range(self._depth + 1)),
        })

    @property
    def width(self):
        return self._width

    @property
    def depth(self):
        return self._depth

    @property
    def latency(self):
        """Cycles from a write transfer to the item's ``r.valid``."""
        return 1

    def elaborate(self, platform):
        m = Module()
        depth = self._depth

        w_fire = Signal()
        r_fire = Signal()
        m.d.comb += [
            self.w.ready.eq(self.level != depth),
            self.r.valid.eq(self.level != 0),
            w_fire.eq(self.w.valid & self.w.ready),
            r_fire.eq(self.r.valid & self.r.ready),
        ]

        if depth == 1:
            # A one-entry ring has zero-width pointers, which Verilog cannot
            # declare; it is a single register.
            data = Signal(self._width)
            with m.If(w_fire):
                m.d.sync += data.eq(self.w.payload)
            m.d.comb += self.r.payload.eq(data)
        else:
            m.submodules.storage = storage = Memory(shape=self._width, depth=depth, init=[])
            wr = storage.write_port()
            rd = storage.read_port(domain="comb")
            w_ptr = Signal(range(depth))
            r_ptr = Signal(range(depth))
            m.d.comb += [
                wr.addr.eq(w_ptr),
                wr.data.eq(self.w.payload),
                wr.en.eq(w_fire),
                rd.addr.eq(r_ptr),
                self.r.payload.eq(rd.data),
            ]
            # Pointers wrap explicitly, so any depth works, not only powers of two.
            with m.If(w_fire):
                m.d.sync += w_ptr.eq(Mux(w_ptr == depth - 1, 0, w_ptr + 1))
            with m.If(r_fire):
                m.d.sync += r_ptr.eq(Mux(r_ptr == depth - 1, 0, r_ptr + 1))

        # level ± 1 from the register, selected by the transfers (not level + w - r,
        # whose adder would follow the full/empty flags).
        with m.If(w_fire & ~r_fire):
            m.d.sync += self.level.eq(self.level + 1)
        with m.Elif(r_fire & ~w_fire):
            m.d.sync += self.level.eq(self.level - 1)
        # peak_level >= level always holds, and level moves by one at most, so the
        # new level exceeds the peak exactly when it rises from the peak. Testing
        # that on the registers (instead of comparing the next level, after the adder,
        # with the peak) keeps the path within 4 LUT levels at 400 MHz (VCK190).
        with m.If((self.level == self.peak_level) & w_fire & ~r_fire):
            m.d.sync += self.peak_level.eq(self.peak_level + 1)

        return m

    @property
    def module_name(self):
        """Verilog name encoding the parameters, e.g. ``ring_fifo_w4_d16``."""
        return f"ring_fifo_w{self._width}_d{self._depth}"

    @classmethod
    def from_config(cls, config):
        """The ring of live state-slot indices of a ``golden.config.Config``'s tree
        verification: ``tree.slot_bits`` wide, ``tree.fifo_depth`` deep."""
        from specgen.golden.config import Config
        if not isinstance(config, Config):
            raise TypeError(f"RingFIFO.from_config needs a golden.config.Config, not {config!r}")
        return cls(width=config.tree.slot_bits, depth=config.tree.fifo_depth)
