"""``Sequencer``: the layer sequencer, a walker of descriptor programs in memory.

A decode step is hundreds to thousands of engine descriptors (per layer: the pre-norm, the
in_proj jobs, conv1d, the SSM pass, the gated norm, the out_proj jobs, the residual;
then the final norm, the LM head and the argmax). The host writes them once, as a
*program* of fixed-size records in memory, and starts it with one descriptor; the
sequencer reads the records in order and hands each to its engine, so no host work
sits between layers. A record may wait until given engines are idle (a barrier) before
it is handed out: a stage whose inputs another engine writes waits for that engine,
and descriptors with no such wait overlap (SpecMamba's linear/SSM overlap across
nodes, arXiv 2509.19873, is a program that dispatches node ``j + 1``'s linear jobs
before waiting for node ``j``'s SSM pass).

A record is :attr:`Sequencer.record_bits` bits (a power of two; 1024, 128 bytes, for
the decoder's engines), little-endian in memory, laid out by :func:`record_layout`:

* ``op`` (4 bits): :data:`OP_DISPATCH` hands ``payload`` to engine ``engine``;
  :data:`OP_END` ends the program (it must be the last record, and only it);
* ``engine`` (4 bits): the engine's index;
* ``wait`` (16 bits): bit ``e`` set, engine ``e`` must be idle (every descriptor handed
  to it finished: its ``busy`` low) before the record is acted on. An ``END`` waits for
  the engines whose results the host reads;
* ``payload``: the engine's descriptor in its low bits.
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from specgen.golden.validate import check_int

from .axi_master import AXI4ReadMaster
from .bits import eq_const

__all__ = ["Sequencer", "record_layout", "start_layout", "encode_record", "OP_DISPATCH",
           "OP_END", "SeqError", "HEADER_BITS", "MAX_ENGINES", "RECORD_GAP", "BARRIER_LAG"]

#: Record opcodes.
OP_DISPATCH, OP_END = 1, 2
#: Bits of a record's header (``op``, ``engine``, the reserved byte and ``wait``).
HEADER_BITS = 32
#: Engines a sequencer can drive: the width of ``wait``.
MAX_ENGINES = 16
#: Cycles after a hand-over in which the engine counts as busy whatever its ``busy``
#: says: an engine's ``busy`` rises from its registered descriptor latch, one cycle
#: after the hand-over.
BUSY_GUARD = 2
#: Least cycles between two hand-overs: a record is popped into the decode register
#: the cycle after the last one was taken, and acted on from its second cycle held.
RECORD_GAP = 3
#: Cycles from an engine's ``busy`` falling to a record that waits for it being handed
#: out: ``busy_eff`` and the barrier are registers.
BARRIER_LAG = 2


class SeqError(enum.Enum, shape=3):
    """``error_code``: why a program stopped."""
    NONE = 0
    OPCODE = 1      # an op other than DISPATCH and END
    ENGINE = 2      # DISPATCH to an engine index the sequencer does not have
    END = 3         # END before the last record, or a last record that is not END
    MEMORY = 4      # the program's read answered an AXI error
    ABORTED = 5     # the host's abort


def record_layout(record_bits):
    """The record: ``op``, ``engine``, a reserved byte, ``wait``, then ``payload``."""
    return data.StructLayout({"op": 4, "engine": 4, "reserved": 8, "wait": MAX_ENGINES,
                              "payload": record_bits - HEADER_BITS})


def start_layout(addr_width, max_records):
    """A program: its first record's byte address (record-aligned; low bits ignored) and
    its length in records."""
    return data.StructLayout({"addr": addr_width, "records": range(1, max_records + 1)})


def encode_record(record_bits, *, op, engine=0, wait=(), payload=0):
    """The bytes of one record: ``wait`` an iterable of engine indices, ``payload`` an
    integer (an engine descriptor packed by its layout)."""
    check_int("encode_record", "op", op, min=0, max=15)
    check_int("encode_record", "engine", engine, min=0, max=MAX_ENGINES - 1)
    mask = 0
    for e in wait:
        mask |= 1 << check_int("encode_record", "wait", e, min=0, max=MAX_ENGINES - 1)
    width = record_bits - HEADER_BITS
    if not 0 <= payload < 1 << width:
        raise ValueError(f"encode_record.payload must fit {width} bits, not {payload:#x}")
    word = op | engine << 4 | mask << 16 | payload << HEADER_BITS
    return word.to_bytes(record_bits // 8, "little")


class Sequencer(wiring.Component):
    """Descriptor programs in memory, handed to the engines in order with barriers.

    Parameters
    ----------
    engines : dict of str to data.Layout
        Each engine's descriptor layout, in index order (at most :data:`MAX_ENGINES`).
    max_records : int
        Records of a program at most.
    record_bits : int, optional
        Bits of a record: a power of two ≥ :data:`HEADER_BITS` plus the widest layout
        (default: the smallest such).
    **master
        The :class:`hw.axi_master.AXI4ReadMaster`'s parameters; its ``out_width`` is set
        to ``record_bits`` (a power-of-two multiple of ``data_width``, up to its
        ``fifo_depth``).

    Attributes
    ----------
    start : In(stream.Signature(start_layout(...))), domain ``sync``
        A program. Taken while the sequencer is idle (``busy`` low).
    <engine> : Out(stream.Signature(layout)), one per engine, domain ``sync``
        The engine's descriptors, in program order; a record's payload is valid from
        the second cycle after its barrier clears (and at the earliest its third cycle
        out of memory: records are far apart against the engines' jobs) until the
        engine takes it.
    engine_busy : In(len(engines))
        Bit ``e``: engine ``e`` has work it has not finished. It must be high from the
        cycle after a descriptor is taken (at the latest :data:`BUSY_GUARD` cycles
        after) until that descriptor's last result is in memory.
    busy : Out(1)
        A program is running (from its start to its ``END``'s barrier).
    done : Out(32)
        Programs ended by their ``END``, since reset; it steps the cycle after ``busy``
        falls (as the other counters step a cycle after their event).
    dispatched : Out(32)
        Descriptors handed out, since reset.
    wait_cycles : Out(48)
        Cycles a record waited on its barrier, since reset.
    error : Out(1), error_code : Out(SeqError)
        Sticky until the next ``start``: the program stopped at a bad record, or was
        aborted; the rest of its records are read and dropped.
    abort_req : In(1)
        Stop the running program (``ABORTED``): from the next cycle no record is handed
        out; descriptors already handed out run to their end (the engines' ``busy``
        tells when), and ``busy`` falls once the program's remaining records are read
        and dropped. No ``END`` is acted on, so ``done`` does not step. Ignored while
        no program runs.
    axi : Out(axi4_read_signature), domain ``mem``
    """

    def __init__(self, *, engines, max_records, record_bits=None, **master):
        if not isinstance(engines, dict) or not 1 <= len(engines) <= MAX_ENGINES:
            raise ValueError(f"Sequencer.engines must be a dict of 1 to {MAX_ENGINES} "
                             f"descriptor layouts, not {engines!r}")
        self._engines = {}
        for name, layout in engines.items():
            if name in ("start", "busy", "done", "dispatched", "wait_cycles", "error",
                        "error_code", "abort_req", "axi", "engine_busy") \
                    or not str(name).isidentifier():
                raise ValueError(f"Sequencer.engines: {name!r} is not a usable port name")
            self._engines[name] = data.Layout.cast(layout)
        widest = max(layout.size for layout in self._engines.values())
        need = 1 << (HEADER_BITS + widest - 1).bit_length()
        if record_bits is None:
            record_bits = need
        check_int("Sequencer", "record_bits", record_bits, min=need)
        if record_bits & (record_bits - 1):
            raise ValueError(f"Sequencer.record_bits must be a power of two >= {need} (the "
                             f"header and the widest descriptor), not {record_bits!r}")
        self._record_bits = record_bits
        self._max_records = check_int("Sequencer", "max_records", max_records, min=1)
        self._master = AXI4ReadMaster(**{**master, "out_width": record_bits})
        self._aw = self._master.addr_width
        super().__init__({
            "start": In(stream.Signature(start_layout(self._aw, self._max_records))),
            **{name: Out(stream.Signature(layout)) for name, layout in self._engines.items()},
            "engine_busy": In(len(self._engines)),
            "busy": Out(1), "done": Out(32), "dispatched": Out(32), "wait_cycles": Out(48),
            "error": Out(1), "error_code": Out(SeqError), "abort_req": In(1),
            "axi": self._master.signature.members["axi"],
        })

    @classmethod
    def from_config(cls, config, *, engines, max_records, **overrides):
        """A sequencer on a 64-bit port of ``config``'s board memory."""
        record_bits = overrides.pop("record_bits", None)
        master = AXI4ReadMaster.config_kwargs(config, **{"data_width": 64, **overrides})
        master.pop("out_width", None)            # the record width, set by the sequencer
        return cls(engines=engines, max_records=max_records, record_bits=record_bits, **master)

    record_bits = property(lambda self: self._record_bits)
    engines = property(lambda self: dict(self._engines))
    master = property(lambda self: self._master)

    @property
    def module_name(self):
        return (f"Sequencer_e{len(self._engines)}_r{self._record_bits}_n{self._max_records}_"
                f"{self._master.module_name}")

    def elaborate(self, platform):
        m = Module()
        m.submodules.master = rd = self._master
        wiring.connect(m, wiring.flipped(self.axi), rd.axi)
        names = list(self._engines)
        n = len(names)
        rec_bytes = self._record_bits // 8
        beat_shift = (self._master.data_width // 8 - 1).bit_length()
        per_rec = self._record_bits // self._master.data_width    # beats a record

        running = Signal(name="running")         # records of the program still to come
        left = Signal(range(self._max_records + 1), name="records_left")
        halted = Signal(name="halted")           # an error: drop the rest
        last = Signal(name="left_one")           # left == 1, as a register
        m.d.comb += self.busy.eq(running)
        # ---- start: one read command of the whole program -----------------------------
        p = self.start.payload
        m.d.comb += [self.start.ready.eq(~running & rd.cmd.ready),
                     rd.cmd.valid.eq(self.start.valid & ~running),
                     rd.cmd.payload.addr.eq(
                         Cat(C(0, (rec_bytes - 1).bit_length() - beat_shift),
                             p.addr[(rec_bytes - 1).bit_length():])),
                     rd.cmd.payload.beats.eq(p.records * per_rec)]
        with m.If(self.start.valid & self.start.ready):
            m.d.sync += [running.eq(1), left.eq(p.records), last.eq(p.records == 1),
                         halted.eq(0),
                         self.error.eq(0), self.error_code.eq(SeqError.NONE)]

        # ---- decode: the head record into registers (a cycle a record; records are
        # far apart against the engines' jobs), so the hand-over reads no wide compare.
        rec = data.View(record_layout(self._record_bits), rd.data.payload)
        hv = Signal(name="rec_held")                   # a decoded record waits
        h_last = Signal(name="rec_last")
        h_wait = Signal(n, name="rec_wait")
        h_to = Signal(n, name="rec_to")                # one-hot: a good DISPATCH's engine
        h_end = Signal(name="rec_end")                 # a good END
        h_code = Signal(SeqError, name="rec_error")    # NONE: a good record
        h_bad = Signal(name="rec_bad")                 # h_code is not NONE
        h_payload = Signal(len(rec.payload), name="rec_payload", reset_less=True)
        pop = Signal(name="rec_pop")
        m.d.comb += [pop.eq(rd.data.valid & running & ~hv), rd.data.ready.eq(pop)]
        is_dispatch, is_end = rec.op == OP_DISPATCH, rec.op == OP_END
        # An engine index, or a wait bit, of an engine the sequencer does not have.
        bad_engine = (is_dispatch & (rec.engine >= n)) | (
            rec.wait[n:].any() if n < MAX_ENGINES else C(0, 1))
        code = Mux(~(is_dispatch | is_end), SeqError.OPCODE.value,
                   Mux(bad_engine, SeqError.ENGINE.value,
                       Mux((is_end & ~last) | (is_dispatch & last), SeqError.END.value,
                           SeqError.NONE.value)))
        with m.If(pop):
            m.d.sync += [hv.eq(1), h_last.eq(last), h_wait.eq(rec.wait[:n]),
                         h_payload.eq(rec.payload), h_code.as_value().eq(code),
                         h_bad.eq(code.any()),
                         h_end.eq(is_end & last & ~code.any()),
                         h_to.eq(Cat(*(is_dispatch & eq_const(rec.engine, e) & ~code.any()
                                       for e in range(n)))),
                         left.eq(left - 1), last.eq(left == 2)]

        # ---- act: hand the held record out once its barrier clears -------------------
        recent = [Signal(BUSY_GUARD, name=f"recent_{name}") for name in names]
        handed = Signal(n, name="handed")
        taken = Signal(name="rec_taken")
        # Registered: an engine counts busy from the cycle after a hand-over (handed,
        # then recent) until a cycle after its own busy falls.
        busy_eff = Signal(n, name="busy_eff")
        m.d.sync += busy_eff.eq(self.engine_busy | handed | Cat(*(r.any() for r in recent)))
        # The barrier is a register too, from last cycle's record and busy bits: a record
        # is acted on from its second cycle held. That is safe because busy bits rise
        # only after a hand-over (which ends the record that made it) and a stale busy
        # bit only delays.
        clear = Signal(name="barrier_clear")
        aged = Signal(name="rec_aged")
        m.d.sync += [clear.eq(~(h_wait & busy_eff).any()), aged.eq(hv & ~taken)]
        clear = clear & aged
        live = hv & ~halted
        ready = Cat(*(getattr(self, name).ready for name in names))
        for e, name in enumerate(names):
            port = getattr(self, name)
            m.d.comb += [port.valid.eq(live & h_to[e] & clear), port.payload.eq(h_payload),
                         handed[e].eq(port.valid & port.ready)]
            m.d.sync += recent[e].eq(Cat(handed[e], recent[e][:-1]))
        error_now = live & h_bad
        end_now = live & h_end & clear
        # handed.any() | end_now | error_now | (hv & halted), with the per-engine terms
        # reduced beside the barrier rather than after it.
        m.d.comb += taken.eq(hv & (halted | h_bad | (clear & (h_end | (h_to & ready).any()))))
        with m.If(taken):
            m.d.sync += hv.eq(0)
            with m.If(h_last):
                m.d.sync += running.eq(0)
        # The counters step a cycle after their event: each increment's enable is a
        # register, so no barrier logic sits before a 32- or 48-bit carry chain.
        ev = Signal(3, name="count_events")
        m.d.sync += ev.eq(Cat(end_now, handed.any(), live & ~h_bad & ~clear))
        with m.If(ev[0]):
            m.d.sync += self.done.eq(self.done + 1)
        with m.If(ev[1]):
            m.d.sync += self.dispatched.eq(self.dispatched + 1)
        with m.If(ev[2]):
            m.d.sync += self.wait_cycles.eq(self.wait_cycles + 1)
        # An abort halts as a bad record does (a bad record in the same cycle names its
        # own code: the later assignment wins).
        with m.If(self.abort_req & running & ~halted):
            m.d.sync += [halted.eq(1), self.error.eq(1), self.error_code.eq(SeqError.ABORTED)]
        with m.If(error_now):
            m.d.sync += [halted.eq(1), self.error.eq(1), self.error_code.eq(h_code)]
        # The master's error is sticky (a memory error needs a reset): every later
        # program stops at once too.
        with m.If(rd.error & running & ~halted):
            m.d.sync += [halted.eq(1), self.error.eq(1), self.error_code.eq(SeqError.MEMORY)]
        return m
