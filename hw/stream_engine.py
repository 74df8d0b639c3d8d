"""``StreamEngine``: a stream block of the decoder fed from memory and writing to it.

The vector stages of a Mamba2 layer (the conv1d, the norms, the residual add, the
argmax) are stream blocks: a beat in, a beat (or, for a reduction, one beat a vector)
out. A layer sequencer must run them on operands that live in memory, as it runs the
linear and SSM engines. ``StreamEngine`` is that wrapper: one AXI4 read master per
operand of the block's input beat, joined into the beat; one AXI4 write master per
field of its output beat, forked from it. One descriptor runs ``vectors`` vectors of
``elements`` beats each; the host (or the sequencer) writes descriptors, never a data
word.

Memory layouts (addresses and strides in bytes, each a multiple of its port's beat;
the low bits are ignored). Each operand ``q`` is an element of :attr:`read_bytes` bytes
(its field, zero-padded to a power of two of at least 32 bits): element ``e`` of
vector ``v`` is in chunk ``k = e // chunk``, at
``addr + v·vstride + k·cstride + (e mod chunk)·bytes``. A vector is ``chunks`` chunks
of ``chunk`` elements, the last of ``tail`` (``0``: a whole chunk), so
``(chunks − 1)·chunk + tail = elements``, which the runtime keeps:

* ``chunks = 1``, ``vstride = elements·bytes``: vectors one after another;
* ``vstride = 0``: one vector shared by all (a norm's weights, the conv taps);
* ``chunk = cols``, ``cstride = n_tokens·record``: one token's row of a linear engine
  job (:mod:`hw.linear_engine`'s result records), read in place; ``tail`` is the last
  output group's rows when ``cols`` does not divide the row count (``vhk158``'s 84
  columns against Mamba2's 2,560 or 5,120 rows).

With ``lanes`` elements a beat (:class:`Lanes`, or a block built that wide: the norms'
``GatedRMSNorm(lanes=L)``), an "element" above is a beat of ``L`` model elements, each
operand's field ``L`` values wide (lane ``j`` in bits ``j·element_bits …``): the
descriptor's counts are beats, its addresses and strides bytes as before, and the
``L`` values of a beat are consecutive in memory. The runtime divides its counts by
``L`` (``hw.step_program``). A field too wide for one port is read (or written) in
``P`` parts (:class:`Field`), part ``j`` on a port of its own with the field's geometry
at ``<name>_addr + j·<name>_pstride``: lanes ``j·L/P … (j+1)·L/P − 1`` of each beat, so
each part is a plane of its own in memory (the conv1d's windows and taps on HBM ports).

Each result field ``r`` is written as elements of :attr:`write_bytes` bytes: a field of
at most 16 bits is packed ``32 / bits`` to a 32-bit beat, low first (a binary16 norm
output), so ``elements`` must be a multiple of that; a wider field is zero-padded to a
power of two. Vector ``v``'s results start at ``addr + v·vstride``, ``elements`` of them
(one for a reduction).
"""

from dataclasses import dataclass

import numpy as np
from amaranth import C, Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out, connect
from specgen.golden.config import MEMORY_PORT_BITS, Config, element_bits
from specgen.golden.mamba2 import MAMBA2_DEFAULTS
from specgen.golden.validate import check_int
from specgen.hw.acceptance import GreedyAcceptance
from specgen.hw.argmax import Argmax, argmax_out_layout
from specgen.hw.axi_master import AXI4ReadMaster, AXI4WriteMaster
from specgen.hw.conv1d import Conv1d
from specgen.hw.fp_arith import add_const
from specgen.hw.gated_norm import GatedRMSNorm
from specgen.hw.hierarchy import submodule
from specgen.hw.pipeline import stream_stages
from specgen.hw.residual import Residual

__all__ = [
    "CopyStage",
    "Field",
    "Lanes",
    "StreamEngine",
    "StreamUpsizer",
    "acceptance_engine",
    "argmax_engine",
    "conv1d_engine",
    "conv1d_plane_order",
    "copy_engine",
    "descriptor_layout",
    "element_bits",
    "norm_engine",
    "residual_engine",
]

#: Beats of each result field's FIFO when the output beat forks to several write ports:
#: the block's beat leaves when every FIFO has room, so no master's ready reaches it.
FORK_DEPTH = 4
#: Width of the count of write regions issued, compared with a write master's ``done``
#: (modulo 2**16): more regions than this are never in flight.
ISSUED_BITS = 16


@dataclass(frozen=True)
class Field:
    """One operand (or result) of a block's beat: ``name`` and ``bits``, low bits first.
    With ``parts`` above 1 the field is read (or written) over that many ports of
    ``bits / parts`` bits, ``m_axi_<name>0 …``, part ``j`` the field's ``j``-th slice of
    bits, all with one geometry: part ``j``'s elements at the field's addresses plus
    ``j·<name>_pstride`` (a plane each)."""

    name: str
    bits: int
    parts: int = 1

    def ports(self):
        """``(port name, bits)`` of each part: the field itself when it has one."""
        if self.parts == 1:
            return [(self.name, self.bits)]
        return [(f"{self.name}{j}", self.bits // self.parts) for j in range(self.parts)]


def descriptor_layout(*, reads, writes, max_vectors, max_elements, addr_width):
    """One run: ``vectors``, ``elements`` (per vector), and per operand ``<name>_addr``,
    ``<name>_vstride``, ``<name>_cstride``, ``<name>_chunk``, ``<name>_chunks``,
    ``<name>_tail``, per result ``<name>_addr`` and ``<name>_vstride``, as in the module
    docstring; a field in parts (:class:`Field`) adds ``<name>_pstride``."""
    count = range(1, max_elements + 1)
    fields = {"vectors": range(1, max_vectors + 1), "elements": count}
    for f in reads:
        fields.update({f"{f.name}_addr": addr_width, f"{f.name}_vstride": addr_width,
                       f"{f.name}_cstride": addr_width, f"{f.name}_chunk": count,
                       f"{f.name}_chunks": count, f"{f.name}_tail": range(max_elements + 1)})
        if f.parts > 1:
            fields[f"{f.name}_pstride"] = addr_width
    for f in writes:
        fields.update({f"{f.name}_addr": addr_width, f"{f.name}_vstride": addr_width})
        if f.parts > 1:
            fields[f"{f.name}_pstride"] = addr_width
    return data.StructLayout(fields)


class StreamUpsizer(wiring.Component):
    """``out_width / in_width`` words of a stream out as one word, the earliest low.

    Attributes
    ----------
    i : In(stream.Signature(in_width))
        ``i.ready`` is high unless a full word waits on ``o`` (a register).
    o : Out(stream.Signature(out_width))
        A registered word, offered the cycle after its last part is taken.
    """

    def __init__(self, *, in_width, out_width):
        self._in = check_int("StreamUpsizer", "in_width", in_width, min=1)
        self._out = check_int("StreamUpsizer", "out_width", out_width, min=in_width)
        if out_width % in_width:
            raise ValueError(f"StreamUpsizer.out_width must be a multiple of in_width "
                             f"({in_width}), not {out_width!r}")
        super().__init__({"i": In(stream.Signature(in_width)),
                          "o": Out(stream.Signature(out_width))})

    @property
    def module_name(self):
        return f"StreamUpsizer_i{self._in}_o{self._out}"

    def elaborate(self, platform):
        m = Module()
        ratio = self._out // self._in
        word = Signal(self._out, name="word", reset_less=True)
        full = Signal(name="full")
        part = Signal(range(max(ratio, 2)), name="part")
        m.d.comb += [self.o.valid.eq(full), self.o.payload.eq(word),
                     self.i.ready.eq(~full | self.o.ready)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += full.eq(0)
        with m.If(self.i.valid & self.i.ready):
            # A case per part, not word_select (see StreamDownsizer).
            with m.Switch(part):
                for k in range(ratio):
                    with m.Case(k):
                        m.d.sync += word[k * self._in:(k + 1) * self._in].eq(self.i.payload)
            with m.If(part == ratio - 1):
                m.d.sync += [part.eq(0), full.eq(1)]
            with m.Else():
                m.d.sync += part.eq(add_const(part, 1, len(part)))
        return m


class Lanes(wiring.Component):
    """``len(blocks)`` copies of an element-wise stream block side by side: ``L``
    elements a beat.

    Parameters
    ----------
    blocks : sequence of wiring.Component
        ``L ≥ 2`` identical blocks (streams ``i`` and ``o``) whose ``i.ready`` does not
        depend on ``i.valid`` (a credited output, :func:`hw.stream_pipe.credited_output`):
        driven in lock step, their outputs leave together.
    reads, writes : sequence of Field
        The fields of one block's ``i`` and ``o`` payloads, low bits first, as
        :class:`StreamEngine` takes them.

    Attributes
    ----------
    i : In(stream.Signature(Σ L · element_bits(f.bits) over reads))
    o : Out(stream.Signature(Σ L · element_bits(f.bits) over writes))
        Field-major: field ``f``'s ``L`` lanes, each in an element of
        :func:`element_bits` bits (lane ``j`` at bit ``j·element_bits``, zero-padded),
        then the next field's, so each field is one operand of ``L`` elements in memory
        (:meth:`fields`). A beat is taken when every lane is ready and leaves when every
        lane has its result: the blocks' latency and throughput, ``L`` times the elements.
    """

    def __init__(self, *, blocks, reads, writes):
        self._blocks = list(blocks)
        if len(self._blocks) < 2 or len({b.module_name for b in self._blocks}) != 1:
            raise ValueError(f"Lanes.blocks must be at least 2 identical blocks, not "
                             f"{self._blocks!r}")
        self._reads, self._writes = tuple(reads), tuple(writes)
        L = len(self._blocks)
        super().__init__({
            "i": In(stream.Signature(sum(L * element_bits(f.bits) for f in self._reads))),
            "o": Out(stream.Signature(sum(L * element_bits(f.bits) for f in self._writes)))})

    lanes = property(lambda self: len(self._blocks))
    latency = property(lambda self: self._blocks[0].latency)
    #: One lane's block (they are identical).
    lane_block = property(lambda self: self._blocks[0])

    @property
    def module_name(self):
        return f"Lanes{self.lanes}_{self._blocks[0].module_name}"

    def fields(self, fields, parts=None):
        """``fields`` (one block's) as this component's: ``L·element_bits`` bits each;
        ``parts`` maps a name to the ports it is split over (:class:`Field`), whose
        parts then hold ``L / parts`` lanes each (the lanes are field-major)."""
        parts = parts or {}
        return tuple(Field(f.name, self.lanes * element_bits(f.bits), parts.get(f.name, 1))
                     for f in fields)

    def elaborate(self, platform):
        m = Module()
        L = self.lanes
        subs = [submodule(m, f"lane{j}", b) for j, b in enumerate(self._blocks)]

        def split(value, fields, j):
            """Lane ``j``'s bits of every field of ``value``, as one block's payload."""
            parts, lo = [], 0
            for f in fields:
                e = element_bits(f.bits)
                parts.append(value[lo + j * e:lo + j * e + f.bits])
                lo += L * e
            return Cat(*parts)

        all_ready = Signal(name="lanes_ready")
        all_valid = Signal(name="lanes_valid")
        m.d.comb += [all_ready.eq(Cat(b.i.ready for b in subs).all()),
                     all_valid.eq(Cat(b.o.valid for b in subs).all()),
                     self.i.ready.eq(all_ready), self.o.valid.eq(all_valid)]
        out = []
        for f_at, f in enumerate(self._writes):
            e = element_bits(f.bits)
            lo = sum(w.bits for w in self._writes[:f_at])
            out += [Cat(Value.cast(b.o.payload)[lo:lo + f.bits], C(0, e - f.bits)) for b in subs]
        for j, b in enumerate(subs):
            m.d.comb += [b.i.valid.eq(self.i.valid & all_ready),
                         b.i.payload.eq(split(Value.cast(self.i.payload), self._reads, j)),
                         b.o.ready.eq(self.o.ready & all_valid)]
        m.d.comb += self.o.payload.eq(Cat(*out))
        return m


class StreamEngine(wiring.Component):
    """A stream block with its operands and results in memory.

    Parameters
    ----------
    block : wiring.Component
        With ``i`` (``In(stream.Signature(...))``) and ``o`` (``Out(...)``); the block's
        own latency and throughput set the engine's. A block with an ``In(1)`` port
        ``last`` gets it high with a vector's last ``i`` beat.
    config : golden.config.Config
        The board's memory ports (``board``): the masters' sizes and kinds.
    reads : sequence of Field
        The fields of ``block.i.payload``, low bits first; their bits sum to its width.
        A field in ``parts`` is read over that many ports (:class:`Field`).
    writes : sequence of Field
        Fields of ``block.o.payload``, low bits first, each to its own port (or ports,
        in ``parts``; their bits sum to at most its width: the high bits left over are
        dropped).
    reduce : bool
        ``True``: the block emits one beat per vector (an argmax), ``False``: one per
        input beat.
    max_vectors, max_elements : int
        Descriptor limits (the widths of its counts). An "element" is a beat: with
        ``lanes`` elements a beat, a descriptor's ``elements`` and chunk sizes count
        beats of ``lanes`` model elements, each field ``lanes`` values wide.
    lanes : int
        Model elements a beat (:class:`Lanes`, ``golden.config.Config.stage_lanes``);
        the runtime divides its counts by it.
    addr_width : int
        Byte-address width of every AXI port (default 40).
    name : str
        The module name's stem (default the block's ``module_name``).
    **master_overrides
        Overrides of every AXI master's parameters (``max_burst``, ``max_outstanding``,
        ``fifo_depth``), as in :meth:`hw.axi_master.AXI4ReadMaster.from_config`.

    Attributes
    ----------
    desc : In(stream.Signature(descriptor_layout(...)))
        A run; taken when the engine is idle.
    busy : Out(1)
        From the cycle after ``desc`` is taken until every result region has its B
        response.
    runs : Out(32)
        Runs completed since reset.
    error : Out(1)
        Sticky: an AXI response other than OKAY on any port.
    m_axi_<read> : Out(axi4_read_signature), domain ``mem``
    m_axi_<write> : Out(axi4_write_signature), domain ``mem``
        One per field (per part of a field in parts: ``<name>0 …``),
        ``8·read_bytes[name]`` (``8·write_bytes``) bits wide.

    Notes
    -----
    The engine issues every operand's chunk commands and every result's region
    commands as fast as its masters take them; the join takes a beat when every
    operand has one and the block is ready, so the operands' reads run ahead by the
    masters' FIFOs. A synchronous reset of both domains abandons the run (the
    results already written stay); the runtime runs the descriptor again.
    """

    def __init__(self, *, block, config, reads, writes, reduce=False, max_vectors,
                 max_elements, addr_width=40, name=None, lanes=1, **master_overrides):
        if not isinstance(config, Config):
            raise TypeError(f"StreamEngine.config must be a golden.config.Config, not {config!r}")
        members = getattr(getattr(block, "signature", None), "members", {})
        if "i" not in members or "o" not in members:
            raise TypeError(f"StreamEngine.block must be a component with streams i and o, "
                            f"not {block!r}")
        self._block = block
        self._reads, self._writes = tuple(reads), tuple(writes)
        in_bits = len(Value.cast(block.i.payload))
        out_bits = len(Value.cast(block.o.payload))
        names = [f.name for f in self._reads + self._writes]
        names += [n for f in self._reads + self._writes if f.parts > 1 for n, _ in f.ports()]
        if len(set(names)) != len(names) or not self._reads or not self._writes:
            raise ValueError(f"StreamEngine.reads and writes must be non-empty with distinct "
                             f"names, not {names}")
        if sum(f.bits for f in self._reads) != in_bits:
            raise ValueError(f"StreamEngine.reads must sum to the block's input beat "
                             f"({in_bits} bits), not {sum(f.bits for f in self._reads)}")
        if sum(f.bits for f in self._writes) > out_bits:
            raise ValueError(f"StreamEngine.writes must sum to at most the block's output "
                             f"beat ({out_bits} bits), not {sum(f.bits for f in self._writes)}")
        if not isinstance(reduce, bool):
            raise TypeError(f"StreamEngine.reduce must be True or False, not {reduce!r}")
        self._reduce = reduce
        self._max_v = check_int("StreamEngine", "max_vectors", max_vectors, min=1)
        self._max_e = check_int("StreamEngine", "max_elements", max_elements, min=1)
        self._lanes = check_int("StreamEngine", "lanes", lanes, min=1)
        self._aw = check_int("StreamEngine", "addr_width", addr_width, min=12, max=64)
        self._name = block.module_name if name is None else name
        allowed = MEMORY_PORT_BITS[config.board.memory]
        self._rbits, self._wbits = {}, {}
        for f, kind in [(f, "reads") for f in self._reads] + [(f, "writes") for f in self._writes]:
            check_int("StreamEngine", f"{kind}.{f.name}.bits", f.bits, min=1)
            check_int("StreamEngine", f"{kind}.{f.name}.parts", f.parts, min=1)
            if f.bits % f.parts:
                raise ValueError(f"StreamEngine.{kind}.{f.name}.parts must divide its bits "
                                 f"({f.bits}), not {f.parts}")
            for name, part_bits in f.ports():
                bits = element_bits(part_bits)
                if kind == "reads" and bits < 32:
                    raise ValueError(f"StreamEngine.reads.{name}.bits must be at least 32 (an "
                                     f"operand is a beat of its own), not {part_bits}")
                if max(bits, 32) not in allowed:
                    raise ValueError(f"StreamEngine.{kind}.{name}.bits must fit a port of "
                                     f"{', '.join(map(str, allowed))} bits on "
                                     f"{config.board.name!r} ({config.board.memory}), not "
                                     f"{part_bits}")
                (self._rbits if kind == "reads" else self._wbits)[name] = bits
        kw = dict(master_overrides, addr_width=self._aw)
        self._rd = {n: AXI4ReadMaster.from_config(config, data_width=b, out_width=b, **kw)
                    for n, b in self._rbits.items()}
        self._wr = {n: AXI4WriteMaster.from_config(config, data_width=max(b, 32), **kw)
                    for n, b in self._wbits.items()}
        super().__init__({
            "desc": In(stream.Signature(self.descriptor_layout)),
            "busy": Out(1), "runs": Out(32), "error": Out(1),
            **{f"m_axi_{n}": Out(r.signature.members["axi"].signature) for n, r in self._rd.items()},
            **{f"m_axi_{n}": Out(w.signature.members["axi"].signature) for n, w in self._wr.items()},
        })

    block = property(lambda self: self._block)
    reads = property(lambda self: self._reads)
    writes = property(lambda self: self._writes)
    reduce = property(lambda self: self._reduce)
    max_vectors = property(lambda self: self._max_v)
    max_elements = property(lambda self: self._max_e)
    addr_width = property(lambda self: self._aw)
    lanes = property(lambda self: self._lanes)

    @property
    def descriptor_layout(self):
        return descriptor_layout(reads=self._reads, writes=self._writes,
                                 max_vectors=self._max_v, max_elements=self._max_e,
                                 addr_width=self._aw)

    @property
    def read_bytes(self):
        """Bytes of one element of each operand (each part of one: :meth:`Field.ports`) in
        memory."""
        return {n: b // 8 for n, b in self._rbits.items()}

    @property
    def write_bytes(self):
        """Bytes of one element of each result in memory (a 32-bit beat holds
        ``4 / write_bytes`` of a packed field)."""
        return {n: b // 8 for n, b in self._wbits.items()}

    @property
    def pack(self):
        """Elements per written beat of each result (2 for binary16, else 1)."""
        return {n: max(32 // b, 1) for n, b in self._wbits.items()}

    @property
    def module_name(self):
        kind = "r" if self._reduce else "m"
        return f"StreamEngine_{self._name}_{kind}_v{self._max_v}_e{self._max_e}_a{self._aw}"

    def elaborate(self, platform):
        m = Module()
        blk = submodule(m, "block", self._block)
        aw = self._aw
        # The masters run in two clock domains (sync and mem): plain submodules.
        for n, r in self._rd.items():
            m.submodules[f"rd_{n}"] = r
            wiring.connect(m, wiring.flipped(getattr(self, f"m_axi_{n}")), r.axi)
        for n, w in self._wr.items():
            m.submodules[f"wr_{n}"] = w
            wiring.connect(m, wiring.flipped(getattr(self, f"m_axi_{n}")), w.axi)

        def parts(fields, masters):
            """Per field its parts' ``(master, port name, bits)`` (one for a field in one
            piece)."""
            return [(f, [(masters[n], n, b) for n, b in f.ports()]) for f in fields]
        rds = parts(self._reads, self._rd)
        wrs = parts(self._writes, self._wr)
        rd_all = [r for _, ms in rds for r, _, _ in ms]
        wr_all = [w for _, ms in wrs for w, _, _ in ms]

        d = Signal(self.descriptor_layout, name="d")
        busy = Signal(name="busy_r")
        accept = Signal(name="accept")
        p = self.desc.payload
        m.d.comb += [self.busy.eq(busy), self.desc.ready.eq(~busy),
                     accept.eq(self.desc.valid & ~busy),
                     self.error.eq(Cat(*(x.error for x in rd_all + wr_all)).any())]
        with m.If(accept):
            m.d.sync += [d.eq(p), busy.eq(1)]

        def beat(value, nbytes):
            """A byte address or stride in beats of ``nbytes`` bytes."""
            return value[(nbytes - 1).bit_length():]

        def part_addr(payload, f, j):
            """Part ``j``'s first byte: the field's address plus ``j·pstride``."""
            a = getattr(payload, f"{f.name}_addr")
            return a if j == 0 else (a + getattr(payload, f"{f.name}_pstride") * j)[:aw]

        # -- the join: a beat when every operand has its element and the block is ready
        have = Signal(name="join_have")
        take = Signal(name="join_take")
        m.d.comb += [have.eq(Cat(r.data.valid for r in rd_all).all()),
                     take.eq(have & blk.i.ready), blk.i.valid.eq(have),
                     blk.i.payload.eq(Cat(r.data.payload[:b] for _, ms in rds
                                          for r, _, b in ms))]
        m.d.comb += [r.data.ready.eq(take) for r in rd_all]
        if "last" in blk.signature.members:
            # A block that needs the vector's end (one tree a vector: its node count is
            # the descriptor's, never the data's) gets it beside the beat.
            e_left = Signal(range(max(self._max_e, 2)), name="join_elements_left")
            with m.If(accept):
                m.d.sync += e_left.eq(p.elements - 1)
            with m.Elif(take):
                m.d.sync += e_left.eq(Mux(e_left.any(), e_left - 1, d.elements - 1))
            m.d.comb += blk.last.eq(~e_left.any())

        # -- read commands: per operand (and part), each vector's chunks
        pending = []
        for f, ms in rds:
            for j, (r, name, _) in enumerate(ms):
                nb = self._rbits[name] // 8
                vstride, cstride, chunk, chunks = (getattr(d, f"{f.name}_{k}") for k in
                                                   ("vstride", "cstride", "chunk", "chunks"))
                want = Signal(name=f"{name}_rd_pending")
                cur = Signal(aw, name=f"{name}_rd_addr")      # beats: this chunk's first
                vbase = Signal(aw, name=f"{name}_rd_vbase")   # beats: this vector's first
                kleft = Signal(range(max(self._max_e, 2)), name=f"{name}_rd_chunks_left")
                klast = Signal(name=f"{name}_rd_chunk_last")
                vleft = Signal(range(max(self._max_v, 2)), name=f"{name}_rd_vectors_left")
                vlast = Signal(name=f"{name}_rd_vector_last")
                with m.If(accept):
                    # From the descriptor port itself (``d`` loads in this cycle); the later
                    # vectors reload from ``d``: the port's payload may change once taken.
                    a = beat(part_addr(p, f, j), nb)
                    p_chunks = getattr(p, f"{f.name}_chunks")
                    m.d.sync += [want.eq(1), cur.eq(a), vbase.eq(a), kleft.eq(p_chunks - 1),
                                 klast.eq(p_chunks == 1), vleft.eq(p.vectors - 1),
                                 vlast.eq(p.vectors == 1)]
                nxt = Signal(aw, name=f"{name}_rd_vnext")
                # The last chunk's beats: ``tail`` when it is set, a whole chunk otherwise.
                # Both are descriptor registers and ``klast`` is one: a 2:1 mux on the
                # command.
                tail = getattr(d, f"{f.name}_tail")
                ragged = Signal(name=f"{name}_rd_ragged")
                m.d.comb += [ragged.eq(klast & tail.any()), r.cmd.valid.eq(want),
                             r.cmd.payload.addr.eq(cur),
                             r.cmd.payload.beats.eq(Mux(ragged, tail, chunk)),
                             nxt.eq(vbase + beat(vstride, nb))]
                with m.If(r.cmd.valid & r.cmd.ready):
                    with m.If(klast):
                        m.d.sync += [vbase.eq(nxt), cur.eq(nxt), kleft.eq(chunks - 1),
                                     klast.eq(chunks == 1), vleft.eq(vleft - 1),
                                     vlast.eq(vleft == 1)]
                        with m.If(vlast):
                            m.d.sync += want.eq(0)
                    with m.Else():
                        m.d.sync += [cur.eq(cur + beat(cstride, nb)), kleft.eq(kleft - 1),
                                     klast.eq(kleft == 1)]
                pending.append(want)

        # -- the fork: each result field (part) to its write port (packed if narrow)
        lo, sinks = 0, []
        for f, ms in wrs:
            for w, name, bits in ms:
                pk = self.pack[name]
                if pk > 1:
                    up = submodule(m, f"up_{name}", StreamUpsizer(in_width=bits, out_width=32))
                    connect(m, up.o, w.data)
                    sinks.append((lo, name, bits, up.i))
                else:
                    sinks.append((lo, name, bits, w.data))
                lo += bits
        out = Value.cast(blk.o.payload)
        if len(sinks) == 1:
            lo, _, bits, sk = sinks[0]
            m.d.comb += [sk.valid.eq(blk.o.valid), sk.payload.eq(out[lo:lo + bits]),
                         blk.o.ready.eq(sk.ready)]
        else:
            forks = [SyncFIFO(width=bits, depth=FORK_DEPTH) for _, _, bits, _ in sinks]
            room = Signal(name="fork_room")
            m.d.comb += [room.eq(Cat(q.w_rdy for q in forks).all()), blk.o.ready.eq(room)]
            for (lo, name, bits, sk), q in zip(sinks, forks):
                m.submodules[f"fork_{name}"] = q
                m.d.comb += [q.w_en.eq(blk.o.valid & room), q.w_data.eq(out[lo:lo + bits]),
                             sk.valid.eq(q.r_rdy), sk.payload.eq(q.r_data), q.r_en.eq(sk.ready)]

        # -- write commands: per result (and part), one region a vector; done when each
        # master's B-response count reaches the regions issued
        idle = []
        for f, ms in wrs:
            for j, (w, name, _) in enumerate(ms):
                nb = max(self._wbits[name], 32) // 8
                pk = self.pack[name]
                want = Signal(name=f"{name}_wr_pending")
                cur = Signal(aw, name=f"{name}_wr_addr")
                vleft = Signal(range(max(self._max_v, 2)), name=f"{name}_wr_vectors_left")
                vlast = Signal(name=f"{name}_wr_vector_last")
                issued = Signal(ISSUED_BITS, name=f"{name}_wr_issued")
                beats = Signal(range(self._max_e + 1), name=f"{name}_wr_beats")
                with m.If(accept):
                    m.d.sync += [want.eq(1), cur.eq(beat(part_addr(p, f, j), nb)),
                                 vleft.eq(p.vectors - 1), vlast.eq(p.vectors == 1),
                                 beats.eq(1 if self._reduce else
                                          p.elements[(pk - 1).bit_length():])]
                m.d.comb += [w.cmd.valid.eq(want), w.cmd.payload.addr.eq(cur),
                             w.cmd.payload.beats.eq(beats)]
                with m.If(w.cmd.valid & w.cmd.ready):
                    m.d.sync += [issued.eq(issued + 1), vleft.eq(vleft - 1),
                                 vlast.eq(vleft == 1),
                                 cur.eq(cur + beat(getattr(d, f"{f.name}_vstride"), nb))]
                    with m.If(vlast):
                        m.d.sync += want.eq(0)
                # ``issued`` counts up the cycle after a command; ``done`` only after its B
                # response, many cycles later: equality with no command pending is the end.
                idle.append(~want & (w.done[:ISSUED_BITS] == issued))
                pending.append(want)
        finished = Signal(name="finished")
        m.d.comb += finished.eq(busy & ~Cat(*pending).any() & Cat(*idle).all())
        with m.If(finished):
            m.d.sync += [busy.eq(0), self.runs.eq(self.runs + 1)]
        return m


# -- the decoder's vector stages ------------------------------------------------------


def _laned(config, stage, make, reads, writes, *, lanes=None, split=None, **kw):
    """The engine of ``make()``'s block at ``config``'s lanes for ``stage`` (or
    ``lanes``): the block itself at one lane, else :class:`Lanes` of as many copies.
    ``split`` maps a field's name to the ports its lanes are read or written over
    (:class:`Field`)."""
    lanes = config.stage_lanes(stage) if lanes is None else lanes
    if lanes == 1:
        return StreamEngine(block=make(), config=config, reads=reads, writes=writes, **kw)
    blk = Lanes(blocks=[make() for _ in range(lanes)], reads=reads, writes=writes)
    return StreamEngine(block=blk, config=config, reads=blk.fields(reads, split),
                        writes=blk.fields(writes, split), lanes=lanes, **kw)


def conv1d_engine(config, *, max_vectors, max_elements, **kw):
    """The conv1d and SiLU of ``config`` (:class:`hw.conv1d.Conv1d`) on channels in memory,
    ``config.stage_lanes("conv1d")`` channels a beat (``max_elements`` in beats).

    Operands ``window`` (the node's parent's ``d_conv − 1`` raw values of a channel,
    oldest first, in a 128-bit element for Mamba2's ``d_conv = 4``), ``x`` (the new raw
    value), ``taps``, ``bias``; results ``y`` (``silu(conv)``) and ``window`` (the new
    window, the node's own, in the layout it was read in).

    When a beat's windows are wider than a memory port (``P = config.conv1d_parts()``
    above 1: four channels on a 256-bit HBM port), ``window``, ``taps`` and
    ``new_window`` are each read or written over ``P`` ports (:class:`Field`), part ``j``
    carrying lanes ``j·L/P … (j+1)·L/P − 1`` of every beat, so each part is a plane of
    its own in memory, ``<name>_pstride`` bytes after the one before
    (:func:`conv1d_plane_order`)."""
    dc = MAMBA2_DEFAULTS["d_conv"]              # Conv1d.from_config's
    w = 32 * (dc - 1)
    P = config.conv1d_parts(d_conv=dc)
    return _laned(config, "conv1d", lambda: Conv1d.from_config(config),
                  (Field("window", w), Field("x", 32), Field("taps", 32 * dc), Field("bias", 32)),
                  (Field("y", 32), Field("new_window", w)), reduce=False,
                  max_vectors=max_vectors, max_elements=max_elements,
                  split={"window": P, "taps": P, "new_window": P}, **kw)


def conv1d_plane_order(channels, *, lanes, parts):
    """Channel held by each element of a conv1d operand split over ``parts`` planes
    (:func:`conv1d_engine`): plane ``j`` (``channels / parts`` elements, the planes one
    after another) holds lanes ``j·L/P … (j+1)·L/P − 1`` of beat ``b`` at its elements
    ``b·L/P …``. ``parts = 1`` is channel order. A segment of channels starting at a
    multiple of ``lanes`` starts in plane ``j`` at element ``j·channels/P + c0/P``."""
    check_int("conv1d_plane_order", "lanes", lanes, min=1)
    check_int("conv1d_plane_order", "parts", parts, min=1)
    if lanes % parts or channels % lanes:
        raise ValueError(f"conv1d_plane_order: parts ({parts}) must divide lanes ({lanes}) "
                         f"and lanes the channels ({channels})")
    per = lanes // parts
    beats = np.arange(channels // lanes)
    return np.concatenate([(beats[:, None] * lanes + j * per + np.arange(per)).reshape(-1)
                           for j in range(parts)])


class CopyStage(wiring.Component):
    """A word in, the same word out, through one register stage with valid/ready
    handshakes: the block of :func:`copy_engine`.

    Parameters
    ----------
    bits : int
        Bits of a word, >= 1.

    Attributes
    ----------
    i : In(stream.Signature(bits)), o : Out(stream.Signature(bits))
        ``o`` carries ``i``'s words in order, the first one cycle after it is taken.
    """

    def __init__(self, *, bits):
        self._bits = check_int("CopyStage", "bits", bits, min=1)
        super().__init__({"i": In(stream.Signature(bits)), "o": Out(stream.Signature(bits))})

    latency = property(lambda self: 1)
    module_name = property(lambda self: f"CopyStage_b{self._bits}")

    def elaborate(self, platform):
        m = Module()
        stream_stages(m, i=self.i, o=self.o, payload=self.i.payload, stages=1)
        return m


def copy_engine(config, *, bits=32, max_vectors, max_elements, **kw):
    """A copy between two layouts (:class:`CopyStage`): operand ``x``, result ``y``,
    ``config.stage_lanes("copy")`` words of ``bits`` bits a beat (``max_elements`` in
    beats). The decoder's moves that no stage computes: ``dt`` from the in_proj records
    into the SSM engine's input record, the embedding rows' gather, and the commit's copy
    of the last accepted node's conv window into the layer's state."""
    lanes = config.stage_lanes("copy")
    width = lanes * bits
    return StreamEngine(block=CopyStage(bits=width), config=config, reduce=False,
                        max_vectors=max_vectors, max_elements=max_elements, lanes=lanes,
                        reads=(Field("x", width),), writes=(Field("y", width),), **kw)


def acceptance_engine(config, *, max_nodes, vocab, max_vectors=1, **kw):
    """Greedy acceptance (:class:`hw.acceptance.GreedyAcceptance`) of trees of at most
    ``max_nodes`` nodes: operands ``node`` (the tree table) and ``best`` (the argmax
    engine's beats), result ``path`` (the accepted path, one 64-bit word a node). A
    vector is one tree; its ``elements`` are the tree's nodes."""
    return StreamEngine(block=GreedyAcceptance(max_nodes=max_nodes, vocab=vocab), config=config,
                        reduce=False, max_vectors=max_vectors, max_elements=max_nodes,
                        reads=(Field("node", 64), Field("best", 64)),
                        writes=(Field("path", 64),), **kw)


def residual_engine(config, *, max_vectors, max_elements, **kw):
    """The residual add of ``config`` (:class:`hw.residual.Residual`): operands ``h`` and
    ``d``, result ``out``, ``config.stage_lanes("residual")`` elements a beat
    (``max_elements`` in beats)."""
    return _laned(config, "residual", lambda: Residual.from_config(config),
                  (Field("h", 32), Field("d", 32)), (Field("out", 32),), reduce=False,
                  max_vectors=max_vectors, max_elements=max_elements, **kw)


def norm_engine(config, *, size, gate, out_fmt, max_vectors, **kw):
    """A gated RMSNorm of ``config`` (:class:`hw.gated_norm.GatedRMSNorm`) of ``size``
    elements: operands ``y``, ``z`` (with the gate) and ``w`` (``vstride = 0``: one
    weight vector for every node), result ``out`` in ``out_fmt`` (binary16 packed two a
    word), ``config.stage_lanes("norm")`` elements a beat (the block's lanes). Every
    descriptor's ``elements`` must be ``size / lanes``."""
    blk = GatedRMSNorm.from_config(config, size=size, gate=gate, out_fmt=out_fmt)
    L = blk.lanes
    reads = (Field("y", 32 * L),) + ((Field("z", 32 * L),) if gate else ()) + (Field("w", 32 * L),)
    return StreamEngine(block=blk, config=config, reduce=False, max_vectors=max_vectors,
                        max_elements=blk.beats, reads=reads, lanes=L,
                        writes=(Field("out", out_fmt.width * L),), **kw)


def argmax_engine(config, *, size, max_vectors, **kw):
    """The greedy argmax (:class:`hw.argmax.Argmax`) of ``size`` logits a vector,
    ``config.stage_lanes("argmax")`` a beat: operand ``logits``, result ``result``
    (:func:`hw.argmax.argmax_out_layout`, in a 64-bit element), one a vector. Every
    descriptor's ``elements`` must be ``size / lanes``."""
    blk = Argmax.from_config(config, size=size)
    L = blk.lanes
    return StreamEngine(block=blk, config=config, reduce=True, max_vectors=max_vectors,
                        max_elements=size // L, reads=(Field("logits", 32 * L),), lanes=L,
                        writes=(Field("result", argmax_out_layout(size).size),), **kw)
