"""``EmbeddingReader``: a token in, the read command of its embedding row out.

The hardware image of :func:`golden.embedding.embedding_command`. Its output
is the ``cmd`` stream of the project's AXI4 read master
(:func:`hw.axi_master.command_layout`), which cuts the row into AXI4 bursts;
the row's beats return on the master's data stream unchanged.
"""

from amaranth import C, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.embedding import row_beats
from specgen.golden.mamba2 import MAMBA2_VOCAB
from specgen.golden.validate import check_int
from specgen.hw.axi_master import command_layout
from specgen.hw.bits import index_width, zero_extend
from specgen.hw.fp_datapath import ge_const

__all__ = ["EmbeddingReader"]


class EmbeddingReader(wiring.Component):
    """``embedding_command`` of one token per two cycles.

    Parameters
    ----------
    vocab : int
        Rows of the table (Mamba2: 50,288).
    row_bytes, beat_bytes : int
        Bytes of a row and of a memory beat (a power of two dividing ``row_bytes``).
    beat_bits : int
        Width of a beat address (the read master's ``command_layout``).

    Attributes
    ----------
    base : In(beat_bits)
        The table's first beat; hold it while tokens are in flight.
    i : In(stream.Signature(⌈log2 vocab⌉))
        Token ids. ``i.ready`` is low while a command waits on ``o``.
    o : Out(stream.Signature(command_layout(beat_bits)))
        ``addr = base + token·row_beats``, ``beats = row_beats``, offered from the
        cycle after the token (:attr:`latency`) until taken.
    bad : Out(1)
        Sticky: a token ``≥ vocab`` arrived (it issued no command). Cleared by reset.
    """

    def __init__(self, *, row_bytes, beat_bytes, beat_bits, vocab=MAMBA2_VOCAB):
        self._vocab = check_int("EmbeddingReader", "vocab", vocab, min=1)
        self._beats = row_beats(row_bytes=row_bytes, beat_bytes=beat_bytes)
        self._bb = check_int("EmbeddingReader", "beat_bits", beat_bits, min=1, max=64)
        if self._beats >> self._bb or (vocab * self._beats - 1) >> self._bb:
            raise ValueError(f"EmbeddingReader.beat_bits must hold the table's "
                             f"{vocab * self._beats} beats, not {beat_bits!r}")
        self._row_bytes, self._beat_bytes = row_bytes, beat_bytes
        super().__init__({"base": In(beat_bits), "i": In(stream.Signature(index_width(vocab))),
                          "o": Out(stream.Signature(command_layout(beat_bits))),
                          "bad": Out(1)})

    @property
    def row_beats(self):
        return self._beats

    @property
    def latency(self):
        """Cycles from a token's transfer to its command on ``o``."""
        return 1

    @property
    def module_name(self):
        return f"EmbeddingReader_v{self._vocab}_r{self._beats}_b{self._bb}"

    def elaborate(self, platform):
        m = Module()
        bb, tok = self._bb, self.i.payload
        m.d.comb += self.i.ready.eq(~self.o.valid)
        accept = self.i.valid & self.i.ready
        bad = ge_const(tok, self._vocab) if self._vocab < (1 << len(tok)) else C(0, 1)
        offset = zero_extend(tok * C(self._beats, bb), bb)
        addr = (zero_extend(self.base, bb + 1) + zero_extend(offset, bb + 1))[:bb]
        with m.If(accept & bad):
            m.d.sync += self.bad.eq(1)
        with m.If(accept & ~bad):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.addr.eq(addr),
                         self.o.payload.beats.eq(self._beats)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m
