"""The decoder top's register map and the host's driver of it (:mod:`gen.runtime.driver`).

The top itself runs in ``tests/test_rtl_generate.py``: every generation there reaches the
core only through these registers (both back-ends). Here: the map's layout, read from
its C header (the route a board user takes) rather than from the code under test; the
driver's checks and its protocol against a fake device whose register semantics are
written from the map's descriptions; and the UIO interrupt protocol over a socket.
"""

import re
import socket
import threading

import pytest
from amaranth import Shape

from specgen.golden.config import preset
from specgen.golden.lm import lm_preset
from specgen.hw.decoder import DECODER_ENGINES
from specgen.hw.decoder_top import DECODER_COUNTERS, decoder_regmap

from specgen.gen.runtime.driver import CoreDriver, CoreError
from specgen.gen.runtime.regbus import RegisterBus, Registers, UIOInterrupt
from specgen.gen.runtime.runtime import RtlEngine

from axil_amaranth import axil_read, axil_write

CONFIG = preset("sim")


@pytest.fixture(scope="module")
def core():
    _, core = RtlEngine(config=CONFIG).core(lm_preset("micro"), 5)
    core._MustUse__silence = True          # described, never elaborated
    return core


@pytest.fixture(scope="module")
def regmap(core):
    return decoder_regmap(core)


def header(regmap):
    return {m.group(1): int(m.group(2), 0) for m in
            re.finditer(r"#define SPECGEN_CORE_(\w+) (0x[0-9a-f]+|\d+)u\b",
                        regmap.to_c_header())}


def test_the_header_gives_the_layout_and_the_capabilities(core, regmap):
    h = header(regmap)
    assert h["ID_RESET"] == int.from_bytes(b"SPCD", "big")
    assert h["CAPS_MAX_NODES_RESET"] == core.max_nodes == 5
    assert h["CAPS_ENGINES_RESET"] == len(DECODER_ENGINES)
    assert h["CAPS_ADDR_WIDTH_RESET"] == core.addr_width
    assert h["CAPS_PROGRAM_MAX_RECORDS_RESET"] == core.max_records
    assert h["CAPS_PROGRAM_RECORD_BYTES_RESET"] * 8 == core.record_bits
    # Every counter is a LO/HI pair, 8 bytes apart, none overlapping another register.
    for name in DECODER_COUNTERS:
        assert h[f"{name}_HI_OFFSET"] == h[f"{name}_LO_OFFSET"] + 4
    offsets = sorted(v for k, v in h.items() if k.endswith("_OFFSET"))
    assert len(offsets) == len(set(offsets))
    # The program address keeps only the record-aligned bits.
    assert 1 << h["PROG_ADDR_LO_ADDR_SHIFT"] == core.record_bits // 8
    # The error codes are the sequencer's.
    assert h["STATUS_ERROR_CODE_ABORTED"] == 5


def test_the_node_table_word_holds_node_source_and_entry(core, regmap):
    tbl = regmap["TBL"]
    ssm = core.engines["ssm"].signature.members
    widths = {f.name: f.width for f in tbl.fields}
    for field, port in (("NODE", "tbl_node"), ("SRC", "tbl_src"), ("ENTRY", "tbl_entry")):
        assert widths[field] == Shape.cast(ssm[port].shape).width, field
    assert tbl.field("WRITE").lsb == 31 and tbl.field("WRITE").access == "WO"
    spans = sorted((f.lsb, f.lsb + f.width) for f in tbl.fields)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


class FakeCore(RegisterBus):
    """The top's registers as their descriptions say, in Python: ``START`` takes the
    program (a run of ``cycles`` polls of ``EVENT``), its end sets ``EVENT.END``;
    ``ABORT`` ends it with ``ABORTED``. ``error`` makes the next program fail so."""

    def __init__(self, regmap, *, cycles=3, error=None):
        super().__init__(span=regmap.span)
        self.map, self.cycles, self.error = regmap, cycles, error
        self.words = {r.offset + 4 * i: r.reset for r in regmap.registers for i in range(r.count)}
        self.log, self.table, self.left, self.code = [], {}, 0, 0

    def off(self, name):
        return self.map[name].offset

    def _read(self, offset):
        if offset == self.off("EVENT") and self.left:
            self.left -= 1
            if not self.left:
                self.words[offset] = 1
        if offset == self.off("STATUS"):
            busy = 1 if self.left else 0
            return busy | (1 - busy) << 1 | (self.code != 0) << 2 | self.code << 4
        return self.words[offset]

    def _write(self, offset, value):
        name = next(r.name for r in self.map.registers if r.offset == offset)
        self.log.append((name, value))
        if name == "TBL":
            f = {x.name: (value & x.mask) >> x.lsb for x in self.map["TBL"].fields}
            if f["WRITE"]:
                self.table[f["NODE"]] = (f["ENTRY"], f["SRC"])
        elif name == "EVENT":
            self.words[offset] &= ~value
        elif name == "CTRL":
            if value & 1:
                self.left, self.code = self.cycles, 0
                self.words[self.off("PERF_PROGRAM_LO")] = 100 + self.cycles
                if self.error:
                    self.code, self.left = self.error, 1
            if value & 2 and self.left:
                self.left, self.code = 1, 5
        elif name not in ("PERF_CTRL",):
            self.words[offset] = value


def test_the_driver_runs_a_program_in_the_maps_order(regmap):
    dev = FakeCore(regmap, cycles=4)
    drv = CoreDriver(regs=Registers(bus=dev, regmap=regmap), poll_s=0)
    drv.write_table([(0, 0b101, 0), (1, 0b011, 1)])
    assert dev.table == {0: (0b101, 0), 1: (0b011, 1)}
    drv.start(3 * drv.record_bytes, 7)
    names = [n for n, _ in dev.log]
    # The program's address and length come before START; END is cleared before it too.
    assert names[-1] == "CTRL" and {"PROG_ADDR_LO", "PROG_RECORDS", "EVENT"} <= set(names[:-1])
    assert dict(dev.log)["PROG_RECORDS"] == 7
    shift = regmap["PROG_ADDR_LO"].field("ADDR").lsb
    assert dict(dev.log)["PROG_ADDR_LO"] == 3 * drv.record_bytes
    assert (3 * drv.record_bytes) % (1 << shift) == 0
    assert drv.wait() == 104


def test_the_driver_names_a_failed_program_and_checks_an_abort(regmap):
    drv = CoreDriver(regs=Registers(bus=FakeCore(regmap, error=4), regmap=regmap), poll_s=0)
    drv.start(0, 1)
    with pytest.raises(CoreError, match="ERROR_CODE MEMORY"):
        drv.wait()
    dev = FakeCore(regmap, cycles=50)
    drv = CoreDriver(regs=Registers(bus=dev, regmap=regmap), poll_s=0)
    drv.start(0, 1)
    drv.abort()
    assert dev.code == 5


@pytest.mark.parametrize("kwargs, fragment", [
    ({"addr": 3, "records": 1}, "multiple of the record size"),
    ({"addr": 0, "records": 0}, "records must be in"),
    ({"addr": -64, "records": 1}, "multiple of the record size"),
])
def test_the_driver_refuses_a_bad_program(regmap, kwargs, fragment):
    drv = CoreDriver(regs=Registers(bus=FakeCore(regmap), regmap=regmap), poll_s=0)
    with pytest.raises(ValueError, match=fragment):
        drv.start(kwargs["addr"], kwargs["records"])
    with pytest.raises(ValueError, match=f"records must be in \\[1, {drv.max_records}\\]"):
        drv.start(0, drv.max_records + 1)


def test_the_driver_refuses_another_device(regmap):
    from specgen.hw.regmap import accelerator_regmap
    other = FakeCore(regmap)
    other.words[0] = accelerator_regmap(CONFIG)["ID"].reset      # the accelerator's "SPEC"
    with pytest.raises(RuntimeError, match="ID reads 0x53504543"):
        CoreDriver(regs=Registers(bus=other, regmap=regmap))


def test_the_driver_times_out_on_a_program_that_never_ends(regmap):
    dev = FakeCore(regmap, cycles=10**9)
    drv = CoreDriver(regs=Registers(bus=dev, regmap=regmap), timeout_s=0.05, poll_s=0.001)
    drv.start(0, 1)
    with pytest.raises(CoreError, match="did not end in 0.05 s"):
        drv.wait()


def test_uio_interrupt_unmasks_then_reads_the_count():
    """UIO's protocol: a 32-bit 1 written unmasks, a 4-byte read returns the count."""
    host, device = socket.socketpair()
    irq = UIOInterrupt(fd=host.fileno())
    assert irq.wait(0.01) is False                      # nothing fired
    assert device.recv(4) == (1).to_bytes(4, "little")  # but it was unmasked

    def fire():
        assert device.recv(4) == (1).to_bytes(4, "little")
        device.send((7).to_bytes(4, "little"))

    t = threading.Thread(target=fire)
    t.start()
    assert irq.wait(5.0) is True and irq.count == 7
    t.join()
    with pytest.raises(ValueError, match="exactly one of path and fd"):
        UIOInterrupt()
    host.close()
    device.close()


class SimBus(RegisterBus):
    """AXI4-Lite transactions on a component's ``s_axi`` in Amaranth's simulator, asked for
    from the driver's thread: the simulator stands still while the host thinks, as the
    cocotb bridge does."""

    def __init__(self, span):
        import queue
        super().__init__(span=span)
        self.requests, self.replies = queue.Queue(), queue.Queue()

    def _read(self, offset):
        self.requests.put(("r", offset, 0))
        return self.replies.get()

    def _write(self, offset, value):
        self.requests.put(("w", offset, value))
        self.replies.get()

    async def serve(self, ctx, bus):
        """The testbench: each request one transaction, until ``None``."""
        while (req := self.requests.get()) is not None:
            kind, offset, value = req
            if kind == "w":
                await axil_write(ctx, bus, offset, value)
                self.replies.put(None)
            else:
                self.replies.put(await axil_read(ctx, bus, offset))


def test_core_control_on_the_simulator(core):
    """The registers' RTL (:class:`hw.decoder_top.CoreControl`) driven by the host's driver
    over AXI4-Lite, with a scripted core: the program's address and length reach the
    core, the node table is written entry by entry, the end raises ``irq``, and the
    counters count what the script did, overlap included. Then an abort, and a START
    written while a program runs (taken once it ends)."""
    import random

    from amaranth.sim import Simulator

    from specgen.hw.decoder_top import CoreControl

    dut = CoreControl(core=core)
    eng = list(DECODER_ENGINES)
    lin, ssm = 1 << eng.index("linear"), 1 << eng.index("ssm")
    rng = random.Random(5)
    # Per program: cycles busy, and per cycle the engines' busy bits (random, so the
    # linear and SSM engines overlap in some cycles and not in others).
    scripts = [[rng.choice((0, lin, ssm, lin | ssm, 1 << 4)) for _ in range(n)]
               for n in (37, 200, 64)]
    seen = {"starts": [], "table": [], "aborts": 0}
    bus = SimBus(dut.regmap.span)

    async def core_model(ctx):
        done = 0
        ctx.set(dut.idle, 1)
        for script in scripts:
            ctx.set(dut.start.ready, 1)
            while not ctx.get(dut.start.valid):
                if ctx.get(dut.tbl_we):
                    seen["table"].append((ctx.get(dut.tbl_node),
                                          ctx.get(dut.tbl_entry.as_value()),
                                          ctx.get(dut.tbl_src)))
                await ctx.tick()
            seen["starts"].append((ctx.get(dut.start.payload.addr),
                                   ctx.get(dut.start.payload.records)))
            await ctx.tick()
            ctx.set(dut.start.ready, 0)
            ctx.set(dut.busy, 1)
            ctx.set(dut.idle, 0)
            aborted = False
            for bits in script:
                ctx.set(dut.engine_busy, bits)
                if ctx.get(dut.abort_req):
                    aborted = True
                await ctx.tick()
                if aborted:
                    break
            ctx.set(dut.engine_busy, 0)
            ctx.set(dut.busy, 0)
            ctx.set(dut.idle, 1)
            if aborted:
                seen["aborts"] += 1
                ctx.set(dut.error, 1)
                ctx.set(dut.error_code, 5)
            else:
                done += 1
                ctx.set(dut.done, done)
                ctx.set(dut.error, 0)
                ctx.set(dut.error_code, 0)

    async def host_bench(ctx):
        await bus.serve(ctx, dut.s_axi)

    results = {}

    def host():
        try:
            drv = CoreDriver(regs=Registers(bus=bus, regmap=dut.regmap), poll_s=0)
            drv.write_table([(0, 5, 0), (3, 17, 2)])
            drv.start(2 * drv.record_bytes, 9)
            results["cycles"] = drv.wait()
            results["counters"] = drv.counters()
            drv.start(0x4000, 3)
            drv.wait_end()                   # the long program runs to its end...
            results["second"] = drv.counters()
            drv.start(0x40, 2)               # ...and the third is aborted
            drv.abort()
            results["third"] = drv.regs.status()
        except BaseException as exc:         # noqa: BLE001  report it on the main thread
            results["error"] = exc
        finally:
            bus.requests.put(None)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(core_model, background=True)
    sim.add_testbench(host_bench)
    t = threading.Thread(target=host)
    t.start()
    sim.run()
    t.join()
    if "error" in results:
        raise results["error"]
    assert seen["table"] == [(0, 5, 0), (3, 17, 2)]
    assert seen["starts"][:2] == [(2 * core.record_bits // 8, 9), (0x4000, 3)]
    first = scripts[0]
    assert results["cycles"] == len(first)
    c = results["counters"]
    assert c["perf_busy"] == len(first)
    assert c["perf_linear_busy"] == sum(1 for b in first if b & lin)
    assert c["perf_ssm_busy"] == sum(1 for b in first if b & ssm)
    assert c["perf_overlap"] == sum(1 for b in first if b & lin and b & ssm) > 0
    assert c["perf_cycles"] > c["perf_busy"]
    second = results["second"]
    assert second["perf_overlap"] == sum(1 for b in scripts[1] if b & lin and b & ssm)
    assert results["third"]["error"] == "ABORTED" and seen["aborts"] == 1


def test_the_register_doc_is_current():
    from pathlib import Path

    from specgen.gen.emit.regmap_doc import render_core_regmap_doc
    path = Path(__file__).resolve().parents[1] / "docs" / "regmap-core.md"
    assert path.read_text() == render_core_regmap_doc(), (
        "docs/regmap-core.md is stale: run specgen docs regmap-core")
