"""The decoder core's top level: the :class:`hw.decoder.DecoderCore` behind AXI4-Lite registers.

The host reaches the core only through 32-bit registers (:func:`decoder_regmap`, the
same description as ``docs`` and the C header) and through the memory the core's AXI4
masters read and write. Per program it writes the SSM unit's node table (``TBL``, one
write an entry), the program's address and length (``PROG_*``) and ``CTRL.START``, then
waits for ``irq`` (``EVENT.END``) and reads ``STATUS``. ``CTRL.ABORT`` stops a program;
the performance counters measure the linear and SSM engines' busy cycles and their
overlap (``PERF_OVERLAP``, SpecMamba's linear/SSM overlap, arXiv 2509.19873) on the
programs the core really runs. :class:`gen.runtime.driver.CoreDriver` is the host's side.
"""

from amaranth import C, Cat, Module, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi_lite import AXI4LiteRegisterFile, AXI4LiteSignature, field_port_name
from .bits import value_width
from .decoder import DecoderCore
from .perf_counter import PerfCounter
from .regmap import (Enum, Field, Register, RegisterMap, address_registers,
                     counter_registers)
from .sequencer import SeqError

__all__ = ["DECODER_COUNTERS", "DECODER_MAGIC", "DECODER_REGMAP_VERSION", "CoreControl",
           "DecoderTop", "decoder_regmap"]

#: ``ID.MAGIC``: ASCII "SPCD" (the accelerator's map reads "SPEC": a host cannot mistake one
#: top level for the other).
DECODER_MAGIC = 0x53504344
#: ``VERSION``: (major, minor).
DECODER_REGMAP_VERSION = (1, 0)

#: The performance counters, ``name: (offset, what)``; each a 48-bit count read as a LO/HI
#: pair. All but ``PERF_PROGRAM`` are copied at ``PERF_CTRL.SNAPSHOT``.
DECODER_COUNTERS = {
    "PERF_CYCLES": (0x088, "cycles since CLEAR"),
    "PERF_BUSY": (0x090, "cycles a program ran (the sequencer busy)"),
    "PERF_LINEAR_BUSY": (0x098, "cycles the linear engine had work"),
    "PERF_SSM_BUSY": (0x0A0, "cycles the SSM engine had work"),
    "PERF_OVERLAP": (0x0A8, "cycles the linear and SSM engines both had work (SpecMamba's "
                            "linear/SSM overlap)"),
    "PERF_PROGRAM": (0x0B0, "cycles of the last program, from the cycle after START was taken "
                            "to the first cycle the sequencer is not busy; latched at the "
                            "program's end, not by SNAPSHOT"),
}

_SEQ_ERROR_TEXT = {
    "NONE": "no error",
    "OPCODE": "a record's op is neither DISPATCH nor END",
    "ENGINE": "a DISPATCH names an engine the core does not have",
    "END": "END before the program's last record, or a last record that is not END",
    "MEMORY": "the program's read answered an AXI error response",
    "ABORTED": "CTRL.ABORT stopped the program",
}


def decoder_regmap(core):
    """The register map of ``core`` (a :class:`hw.decoder.DecoderCore`).

    Returns
    -------
    hw.regmap.RegisterMap
        Named ``SPECGEN_CORE``: identification, capabilities, control and status, the
        program's address and length, the node-table port and the counters.
    """
    if not isinstance(core, DecoderCore):
        raise TypeError(f"decoder_regmap: core must be a hw.decoder.DecoderCore, not {core!r}")
    n_eng = len(core.engines)
    major, minor = DECODER_REGMAP_VERSION
    record_shift = (core.record_bits // 8).bit_length() - 1
    ssm = core.engines["ssm"].signature.members
    tbl = {"NODE": ssm["tbl_node"].shape, "SRC": ssm["tbl_src"].shape,
           "ENTRY": ssm["tbl_entry"].shape}
    tbl_fields, lsb = [], 0
    text = {"NODE": "the node (its BFS index in this program) whose entry is written",
            "SRC": "the node whose records the entry's node reads (its own index in a tree "
                   "program; the path position's node in a commit)",
            "ENTRY": "the entry (hw.tree_ssm.table_layout: root, parent slot, write slot), "
                     "as hw.step_program.StepPlan packs it"}
    for name, shape in tbl.items():
        width = Shape.cast(shape).width
        tbl_fields.append(Field(name=name, lsb=lsb, width=width, access="RW",
                                description=text[name]))
        lsb += width
    if lsb > 31:
        raise ValueError(f"decoder_regmap: the node table's entry is {lsb} bits with its node "
                         "and source indices, more than the 31 a TBL write carries; fewer "
                         "tree.max_nodes or tree.fifo_depth")
    tbl_fields.append(Field(name="WRITE", lsb=31, width=1, access="WO",
                            description="1: write the entry in the cycle after this write "
                                        "(write it in the same word as the fields)"))
    regs = (
        Register(name="ID", offset=0x000, description="Identifies the decoder core.",
                 fields=(Field(name="MAGIC", lsb=0, width=32, access="CONST",
                               reset=DECODER_MAGIC, description='ASCII "SPCD"'),)),
        Register(name="VERSION", offset=0x004, description="Register map version.",
                 fields=(Field(name="MINOR", lsb=0, width=16, access="CONST", reset=minor,
                               description="compatible additions"),
                         Field(name="MAJOR", lsb=16, width=16, access="CONST", reset=major,
                               description="incompatible changes of offsets or fields"))),
        Register(name="CAPS", offset=0x008, description="What the core was built for.",
                 fields=(Field(name="MAX_NODES", lsb=0, width=16, access="CONST",
                               reset=core.max_nodes,
                               description="tree nodes of a program at most (the tokens of "
                                           "one linear job)"),
                         Field(name="ENGINES", lsb=16, width=8, access="CONST", reset=n_eng,
                               description="engines, in hw.decoder.DECODER_ENGINES' order"),
                         Field(name="ADDR_WIDTH", lsb=24, width=8, access="CONST",
                               reset=core.addr_width,
                               description="byte-address bits of every AXI4 master"))),
        Register(name="CAPS_PROGRAM", offset=0x00C, description="Program records.",
                 fields=(Field(name="MAX_RECORDS", lsb=0, width=24, access="CONST",
                               reset=core.max_records, description="records of a program at "
                                                                   "most"),
                         Field(name="RECORD_BYTES", lsb=24, width=8, access="CONST",
                               reset=core.record_bits // 8,
                               description="bytes of a record (hw.sequencer.record_layout)"))),
        Register(name="CTRL", offset=0x020, description="Starts and aborts a program.",
                 fields=(Field(name="START", lsb=0, width=1, access="WO",
                               description="run the program at PROG_ADDR of PROG_RECORDS "
                                           "records; taken once no program runs "
                                           "(STATUS.START_PENDING until then)"),
                         Field(name="ABORT", lsb=1, width=1, access="WO",
                               description="stop the running program: nothing more is handed "
                                           "out, handed-out descriptors finish; the program "
                                           "ends with ERROR_CODE ABORTED and DONE does not "
                                           "step; rerun once STATUS.IDLE"))),
        Register(name="STATUS", offset=0x024, description="The core's state, read live.",
                 fields=(Field(name="BUSY", lsb=0, width=1, access="RO",
                               description="a program runs"),
                         Field(name="IDLE", lsb=1, width=1, access="RO",
                               description="no program runs and no engine has work"),
                         Field(name="ERROR", lsb=2, width=1, access="RO",
                               description="the last program stopped on an error"),
                         Field(name="START_PENDING", lsb=3, width=1, access="RO",
                               description="START written and not yet taken"),
                         Field(name="ERROR_CODE", lsb=4, width=3, access="RO",
                               description="why the last program stopped",
                               enums=tuple(Enum(name=e.name, value=e.value,
                                                description=_SEQ_ERROR_TEXT[e.name])
                                           for e in SeqError)),
                         Field(name="ENGINE_ERROR", lsb=16, width=n_eng, access="RO",
                               description="bit e: engine e saw an AXI error response "
                                           "(sticky until reset)"))),
        Register(name="EVENT", offset=0x028, description="Sticky events; the irq output is "
                 "EVENT.END.",
                 fields=(Field(name="END", lsb=0, width=1, access="W1C",
                               description="a program ended (done, error or abort) since this "
                                           "bit was last cleared; write 1 to clear"),)),
        Register(name="DONE", offset=0x02C, description="Programs ended by their END record.",
                 fields=(Field(name="COUNT", lsb=0, width=32, access="RO",
                               description="since reset (wraps)"),)),
        *address_registers("PROG_ADDR", 0x030, record_shift,
                           f"Byte address of the next program's first record, bits 31..0; "
                           f"{core.record_bits // 8}-byte aligned. Read at CTRL.START.",
                           "Byte address of the next program, bits 63..32."),
        Register(name="PROG_RECORDS", offset=0x038, description="Records of the next program "
                 "(its END included). Read at CTRL.START.",
                 fields=(Field(name="RECORDS", lsb=0, width=value_width(core.max_records),
                               access="RW", description=f"1 .. {core.max_records}"),)),
        Register(name="TBL", offset=0x040, description="Writes one entry of the SSM engine's "
                 "node table (the tree's FIFO schedule, hw.ssm_engine.SSMEngine). Write "
                 "while STATUS.IDLE, every program's entries, and again after a reset.",
                 fields=tuple(tbl_fields)),
        Register(name="PERF_CTRL", offset=0x080, description="Performance counter control.",
                 fields=(Field(name="SNAPSHOT", lsb=0, width=1, access="WO",
                               description="copy every counter but PERF_PROGRAM into its "
                                           "LO/HI pair at once"),
                         Field(name="CLEAR", lsb=1, width=1, access="WO",
                               description="zero every counter but PERF_PROGRAM"))),
        *(r for name, (offset, what) in DECODER_COUNTERS.items()
          for r in counter_registers(name, offset, what, snapshot=name != "PERF_PROGRAM")),
    )
    return RegisterMap(name="SPECGEN_CORE", registers=regs,
                       description=f"AXI4-Lite registers of the specgen decoder core "
                                   f"(`{core.module_name}`): 32-bit registers, byte offsets "
                                   "from the base address IP Integrator assigns.")


#: The core's ports :class:`CoreControl` drives (``Out``) and reads (``In``), by name.
_TO_CORE = ("abort_req", "tbl_we", "tbl_node", "tbl_src", "tbl_entry")
_FROM_CORE = ("busy", "idle", "done", "error", "error_code", "engine_error", "engine_busy")


class CoreControl(wiring.Component):
    """The registers of :func:`decoder_regmap` and the logic behind them, beside a core.

    Parameters
    ----------
    core : hw.decoder.DecoderCore
        The core it will be wired to (:class:`DecoderTop`); only its ports' shapes are
        read here.

    Attributes
    ----------
    s_axi : In(AXI4LiteSignature(addr_width=regmap.addr_width))
        The registers (:class:`hw.axi_lite.AXI4LiteRegisterFile`'s timing: a read's data
        the cycle after its address, a write's effect the cycle after both its beats).
    irq : Out(1)
        ``EVENT.END``: high from the cycle after a program ends until the host writes 1
        to it. Level-sensitive, for the PS's PL-to-PS interrupt (a UIO device's
        interrupt on a Versal Linux image).
    start : Out(the core's ``start`` stream)
        The program of ``PROG_ADDR``/``PROG_RECORDS``, valid from the cycle after a
        ``CTRL.START`` write until the core takes it.
    abort_req, tbl_we, tbl_node, tbl_src, tbl_entry : Out
        To the core's ports of those names: ``abort_req`` high for one cycle after a
        ``CTRL.ABORT`` write, ``tbl_we`` for one cycle after a ``TBL`` write with
        ``WRITE`` set, the fields then on ``tbl_*``.
    busy, idle, done, error, error_code, engine_error, engine_busy : In
        From the core's ports of those names (:class:`hw.decoder.SequencedCore`).

    Notes
    -----
    The counters are :class:`hw.perf_counter.PerfCounter`: an event is in the count one
    cycle later, and a snapshot is consistent. The engines' busy bits and the core's
    ``busy`` are registered once before they are counted (a fan-out register, no logic
    in front of the counters' adders), so a counter starts and stops one cycle after
    its event. ``PERF_PROGRAM`` counts the core's ``busy`` cycles from the start's
    handshake and is copied out in the first cycle ``busy`` is low again.
    """

    def __init__(self, *, core):
        if not isinstance(core, DecoderCore):
            raise TypeError(f"CoreControl.core must be a hw.decoder.DecoderCore, not {core!r}")
        self.regmap = decoder_regmap(core)
        self.engines = tuple(core.engines)
        sig = core.signature.members
        super().__init__({
            "s_axi": In(AXI4LiteSignature(addr_width=self.regmap.addr_width)),
            "irq": Out(1),
            "start": Out(sig["start"].signature.flip()),
            **{n: Out(sig[n].shape) for n in _TO_CORE},
            **{n: In(sig[n].shape) for n in _FROM_CORE},
        })

    def elaborate(self, platform):
        m = Module()
        regs = m.submodules.regs = AXI4LiteRegisterFile(regmap=self.regmap)
        wiring.connect(m, wiring.flipped(self.s_axi), regs.s_axi)
        rm = self.regmap

        def port(reg, field):
            return getattr(regs, field_port_name(rm[reg], rm[reg].field(field)))

        # --- start and abort ---
        pending = Signal()
        taken = Signal()
        m.d.comb += taken.eq(self.start.valid & self.start.ready)
        with m.If(taken):
            m.d.sync += pending.eq(0)
        with m.If(port("CTRL", "START")):
            m.d.sync += pending.eq(1)
        addr = Cat(port("PROG_ADDR_LO", "ADDR"), port("PROG_ADDR_HI", "ADDR"))
        shift = rm["PROG_ADDR_LO"].field("ADDR").lsb
        m.d.comb += [self.start.valid.eq(pending),
                     self.start.payload.addr.eq(Cat(C(0, shift), addr)),
                     self.start.payload.records.eq(port("PROG_RECORDS", "RECORDS")),
                     self.abort_req.eq(port("CTRL", "ABORT"))]

        # --- status and the end event ---
        m.d.comb += [port("STATUS", "BUSY").eq(self.busy), port("STATUS", "IDLE").eq(self.idle),
                     port("STATUS", "ERROR").eq(self.error),
                     port("STATUS", "START_PENDING").eq(pending),
                     port("STATUS", "ERROR_CODE").eq(self.error_code),
                     port("STATUS", "ENGINE_ERROR").eq(self.engine_error),
                     port("DONE", "COUNT").eq(self.done)]
        was_busy = Signal()
        m.d.sync += was_busy.eq(self.busy)
        ended = Signal()
        m.d.comb += ended.eq(was_busy & ~self.busy)
        end_set = getattr(regs, field_port_name(rm["EVENT"], rm["EVENT"].field("END")) + "_set")
        m.d.comb += [end_set.eq(ended), self.irq.eq(port("EVENT", "END"))]

        # --- the node table ---
        m.d.comb += [self.tbl_we.eq(port("TBL", "WRITE")), self.tbl_node.eq(port("TBL", "NODE")),
                     self.tbl_src.eq(port("TBL", "SRC")),
                     self.tbl_entry.eq(port("TBL", "ENTRY"))]

        # --- counters ---
        lin_busy, ssm_busy, seq_busy = Signal(), Signal(), Signal()
        m.d.sync += [lin_busy.eq(self.engine_busy[self.engines.index("linear")]),
                     ssm_busy.eq(self.engine_busy[self.engines.index("ssm")]),
                     seq_busy.eq(self.busy)]
        events = {"PERF_CYCLES": 1, "PERF_BUSY": seq_busy, "PERF_LINEAR_BUSY": lin_busy,
                  "PERF_SSM_BUSY": ssm_busy, "PERF_OVERLAP": lin_busy & ssm_busy}
        for name, event in events.items():
            c = m.submodules[name.lower()] = PerfCounter()
            m.d.comb += [c.inc.eq(event), c.clear.eq(port("PERF_CTRL", "CLEAR")),
                         c.snap.eq(port("PERF_CTRL", "SNAPSHOT")),
                         port(f"{name}_LO", "VALUE").eq(c.value[:32]),
                         port(f"{name}_HI", "VALUE").eq(c.value[32:])]
        # The last program's cycles: cleared when the program is taken, counting the
        # core's busy cycles, copied out when it ends.
        prog = m.submodules.perf_program = PerfCounter()
        m.d.comb += [prog.inc.eq(self.busy), prog.clear.eq(taken), prog.snap.eq(ended),
                     port("PERF_PROGRAM_LO", "VALUE").eq(prog.value[:32]),
                     port("PERF_PROGRAM_HI", "VALUE").eq(prog.value[32:])]
        return m


class DecoderTop(wiring.Component):
    """A :class:`hw.decoder.DecoderCore` behind its registers (:class:`CoreControl`).

    Parameters
    ----------
    core : hw.decoder.DecoderCore

    Attributes
    ----------
    s_axi, irq : :class:`CoreControl`'s
    m_axi_<name> : the core's AXI4 masters, domain ``mem`` (:class:`hw.decoder.SequencedCore`)
    """

    def __init__(self, *, core):
        if not isinstance(core, DecoderCore):
            raise TypeError(f"DecoderTop.core must be a hw.decoder.DecoderCore, not {core!r}")
        self.core = core
        self.control = CoreControl(core=core)
        self.regmap = self.control.regmap
        super().__init__({
            "s_axi": In(AXI4LiteSignature(addr_width=self.regmap.addr_width)),
            "irq": Out(1),
            **{f"m_axi_{name}": member for name, member in core.ports.items()},
        })

    @property
    def module_name(self):
        return (f"DecoderTop_{self.core.module_name.removeprefix('DecoderCore_')}_"
                f"a{self.core.addr_width}_r{self.core.max_records}")

    def elaborate(self, platform):
        m = Module()
        core = m.submodules.core = self.core
        ctl = m.submodules.control = self.control
        wiring.connect(m, wiring.flipped(self.s_axi), ctl.s_axi)
        wiring.connect(m, ctl.start, core.start)
        m.d.comb += [self.irq.eq(ctl.irq),
                     *(getattr(core, n).eq(getattr(ctl, n)) for n in _TO_CORE),
                     *(getattr(ctl, n).eq(getattr(core, n)) for n in _FROM_CORE)]
        for name in core.ports:
            outer, inner = getattr(self, f"m_axi_{name}"), getattr(core, f"m_axi_{name}")
            # An engine's port array (the linear engine's weight ports) is a list.
            for a, b in zip(outer, inner) if isinstance(inner, list) else [(outer, inner)]:
                wiring.connect(m, wiring.flipped(a), b)
        return m
