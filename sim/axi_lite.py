"""cocotb bench of :class:`hw.axi_lite.AXI4LiteRegisterFile` driven by
``cocotbext-axi``'s ``AxiLiteMaster``, against :class:`RegFileModel`.

The model is written from the register description alone (:mod:`hw.regmap`):
what a write of some bytes does to each access kind, what a read returns, and
which addresses answer ``SLVERR``. Every test runs under random idle cycles on
the AW, W and AR channels and random back-pressure on B and R (the
verilog-axis pattern), with a seeded generator. Between bus operations the
bench changes the ``RO`` inputs and pulses the ``W1C`` set inputs; a monitor
records every cycle of every ``WO`` pulse output.
"""

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from specgen.golden.config import preset
from specgen.hw.axi_lite import field_port_name
from specgen.hw.regmap import accelerator_regmap
from specgen.sim.bench import TB, ChannelStalls, params

__all__ = ["RegFileModel"]


class RegFileModel:
    """Behavioural model of the register file of a :class:`hw.regmap.RegisterMap`."""

    def __init__(self, regmap):
        self.regmap = regmap
        self.stored = {}   # (register, field) -> value of RW and W1C fields
        self.tables = {}   # register -> list of entries (whole words, field bits only)
        self.inputs = {}   # (register, field) -> value driven on an RO input
        for reg in regmap.registers:
            if reg.count > 1:
                self.tables[reg.name] = [0] * reg.count
            for f in reg.fields:
                if f.access in ("RW", "W1C") and reg.count == 1:
                    self.stored[reg.name, f.name] = f.reset
                elif f.access == "RO":
                    self.inputs[reg.name, f.name] = 0

    def locate(self, address):
        """``(register, index)`` at byte ``address``, or ``(None, None)``."""
        word = address >> 2
        for reg in self.regmap.registers:
            base = reg.offset >> 2
            if base <= word < base + reg.count:
                return reg, word - base
        return None, None

    def read(self, address):
        """``(data, resp)`` of a read."""
        reg, index = self.locate(address)
        if reg is None:
            return 0, AxiResp.SLVERR
        value = 0
        for f in reg.fields:
            if reg.count > 1:
                v = (self.tables[reg.name][index] >> f.lsb) & ((1 << f.width) - 1)
            elif f.access == "CONST":
                v = f.reset
            elif f.access == "RO":
                v = self.inputs[reg.name, f.name]
            elif f.access == "WO":
                v = 0
            else:
                v = self.stored[reg.name, f.name]
            value |= v << f.lsb
        return value, AxiResp.OKAY

    def write(self, address, data, strb):
        """Apply a write; return ``(resp, pulses)`` with the expected WO pulses
        ``{port: value}`` (non-zero only)."""
        reg, index = self.locate(address)
        if reg is None:
            return AxiResp.SLVERR, {}
        mask = 0
        for i in range(4):
            if strb >> i & 1:
                mask |= 0xFF << (8 * i)
        pulses = {}
        for f in reg.fields:
            fmask = (1 << f.width) - 1
            new = (data >> f.lsb) & fmask
            m = (mask >> f.lsb) & fmask
            if reg.count > 1:
                old = (self.tables[reg.name][index] >> f.lsb) & fmask
                val = (old & ~m) | (new & m)
                word = self.tables[reg.name][index] & ~(fmask << f.lsb)
                self.tables[reg.name][index] = word | (val << f.lsb)
            elif f.access == "RW":
                old = self.stored[reg.name, f.name]
                self.stored[reg.name, f.name] = (old & ~m) | (new & m)
            elif f.access == "W1C":
                self.stored[reg.name, f.name] &= ~(new & m)
            elif f.access == "WO" and new & m:
                pulses[field_port_name(reg, f)] = new & m
        return AxiResp.OKAY, pulses

    def set_bits(self, reg, f, bits):
        self.stored[reg.name, f.name] |= bits


class AxiLiteTB(TB):
    """Clock, reset, the AXI4-Lite manager, the WO-pulse monitor and the model."""

    def __init__(self, dut):
        super().__init__(dut)
        p = params()
        self.regmap = accelerator_regmap(preset(p["preset"]))
        self.model = RegFileModel(self.regmap)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_"), dut.clk, dut.rst)
        self.stalls = ChannelStalls(dut.clk, self.rng)
        self.pulses = []  # (cycle, port, value) of every non-zero WO output cycle
        self.wo_ports = [(field_port_name(r, f), getattr(dut, field_port_name(r, f)))
                         for r in self.regmap.registers for f in r.fields
                         if f.access == "WO" and r.count == 1]
        for reg in self.regmap.registers:
            for f in reg.fields:
                if f.access == "RO" and reg.count == 1:
                    getattr(dut, field_port_name(reg, f)).value = 0
                if f.access == "W1C":
                    getattr(dut, f"{field_port_name(reg, f)}_set").value = 0
            if reg.count > 1:
                getattr(dut, f"{reg.name.lower()}_addr").value = 0
        cocotb.start_soon(self._monitor())

    def set_idle(self, probability):
        for ch in (self.axil.write_if.aw_channel, self.axil.write_if.w_channel,
                   self.axil.read_if.ar_channel):
            self.stalls.add(ch, probability)

    def set_backpressure(self, probability):
        for ch in (self.axil.write_if.b_channel, self.axil.read_if.r_channel):
            self.stalls.add(ch, probability)

    async def _monitor(self):
        cycle = 0
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            cycle += 1
            for name, sig in self.wo_ports:
                v = int(sig.value)
                if v:
                    self.pulses.append((cycle, name, v))

    async def start(self, *, clear_tables=True):
        """Reset, then zero every table entry over the bus.

        Table entries are LUT RAM that reset does not clear, and cocotb runs
        every test on the same simulation; only the first test sees them at
        their power-up value (``clear_tables=False``).
        """
        await self.reset(cycles=4)
        for _ in range(4):
            await RisingEdge(self.dut.clk)
        if clear_tables:
            for reg in self.regmap.registers:
                for i in range(reg.count if reg.count > 1 else 0):
                    await self.write(reg.offset + 4 * i, 0, 0xF)

    async def quiet(self):
        """Leave the ReadOnly phase: the next writes to inputs are legal."""
        await Timer(1, unit="ns")

    async def drive_inputs(self):
        """New random RO inputs and W1C set pulses, applied between bus operations."""
        rng, dut = self.rng, self.dut
        await RisingEdge(dut.clk)
        sets = []
        for reg in self.regmap.registers:
            if reg.count > 1:
                continue
            for f in reg.fields:
                if f.access == "RO" and rng.random() < 0.3:
                    v = rng.getrandbits(f.width)
                    getattr(dut, field_port_name(reg, f)).value = v
                    self.model.inputs[reg.name, f.name] = v
                if f.access == "W1C" and rng.random() < 0.2:
                    v = rng.getrandbits(f.width)
                    getattr(dut, f"{field_port_name(reg, f)}_set").value = v
                    sets.append((reg, f, v))
        if sets:
            await RisingEdge(dut.clk)
            for reg, f, v in sets:
                getattr(dut, f"{field_port_name(reg, f)}_set").value = 0
                self.model.set_bits(reg, f, v)
        await RisingEdge(dut.clk)

    async def check_outputs(self):
        """RW outputs and the table read port against the model."""
        dut, model = self.dut, self.model
        for reg in self.regmap.registers:
            if reg.count > 1:
                index = self.rng.randrange(reg.count)
                getattr(dut, f"{reg.name.lower()}_addr").value = index
                await ReadOnly()
                for f in reg.fields:
                    got = int(getattr(dut, field_port_name(reg, f)).value)
                    want = (model.tables[reg.name][index] >> f.lsb) & ((1 << f.width) - 1)
                    assert got == want, f"{reg.name}[{index}].{f.name} port = {got:#x}, model {want:#x}"
                await RisingEdge(dut.clk)
                continue
        await ReadOnly()
        for reg in self.regmap.registers:
            for f in reg.fields:
                if reg.count == 1 and f.access in ("RW", "W1C"):
                    got = int(getattr(dut, field_port_name(reg, f)).value)
                    want = model.stored[reg.name, f.name]
                    assert got == want, f"{reg.name}.{f.name} port = {got:#x}, model {want:#x}"
        await RisingEdge(dut.clk)

    async def write(self, address, data, strb):
        """A write of the bytes ``strb`` selects (contiguous) of ``data``; checks resp and pulses."""
        lanes = [i for i in range(4) if strb >> i & 1]
        first, last = lanes[0], lanes[-1]
        payload = bytes((data >> (8 * i)) & 0xFF for i in range(first, last + 1))
        before = len(self.pulses)
        resp = await self.axil.write((address & ~3) + first, payload)
        want_resp, want_pulses = self.model.write(address & ~3, data, strb)
        assert resp.resp == want_resp, f"write {address:#05x}: resp {resp.resp!r}, model {want_resp!r}"
        # The pulse comes one cycle after the internal commit, before bvalid is seen.
        seen = self.pulses[before:]
        got = {name: v for _, name, v in seen}
        assert got == want_pulses, f"write {address:#05x} = {data:#x}/{strb:#x}: pulses {got}, " \
                                   f"model {want_pulses}"
        # Each WO bit is high for exactly one cycle, all fields of one write together.
        assert len(seen) == len(got) and len({c for c, _, _ in seen}) <= 1, \
            f"write {address:#05x}: pulses {seen} span more than one cycle"

    async def read(self, address):
        resp = await self.axil.read(address & ~3, 4)
        got = int.from_bytes(resp.data, "little")
        want, want_resp = self.model.read(address & ~3)
        assert resp.resp == want_resp, f"read {address:#05x}: resp {resp.resp!r}, model {want_resp!r}"
        assert got == want, f"read {address:#05x}: {got:#010x}, model {want:#010x}"
        return got


def _addresses(regmap):
    out = []
    for reg in regmap.registers:
        out += [reg.offset + 4 * i for i in range(reg.count)]
    return out


async def _random_ops(dut, *, ops, idle, stall):
    tb = AxiLiteTB(dut)
    tb.set_idle(idle)
    tb.set_backpressure(stall)
    await tb.start()
    rng = tb.rng
    stats = {"reads": 0, "writes": 0, "slverr": 0, "pulses": 0}
    # Every WO register once with all ones, so each pulse output is exercised
    # whatever the random draw below.
    for reg in tb.regmap.registers:
        if any(f.access == "WO" for f in reg.fields):
            n = len(tb.pulses)
            await tb.write(reg.offset, 0xFFFFFFFF, 0xF)
            stats["pulses"] += len(tb.pulses) - n
    for i in range(ops):
        if rng.random() < 0.3:
            await tb.drive_inputs()
        if rng.random() < 0.1:
            address = rng.randrange(0, tb.regmap.span, 4)  # anywhere, mapped or not
        else:
            # A register uniformly (then an entry of a table), so the few control
            # registers are not drowned by the table's many entries.
            reg = rng.choice(tb.regmap.registers)
            address = reg.offset + 4 * rng.randrange(reg.count)
        if tb.model.locate(address)[0] is None:
            stats["slverr"] += 1
        if rng.random() < 0.5:
            first = rng.randrange(4)
            last = rng.randrange(first, 4)
            strb = sum(1 << j for j in range(first, last + 1)) if rng.random() < 0.5 else 0xF
            # Bias toward all-ones so WO and W1C bits fire often.
            data = rng.getrandbits(32) if rng.random() < 0.7 else 0xFFFFFFFF
            n = len(tb.pulses)
            await tb.write(address, data, strb)
            stats["writes"] += 1
            stats["pulses"] += len(tb.pulses) - n
        else:
            await tb.read(address)
            stats["reads"] += 1
        if i % 25 == 0:
            await tb.check_outputs()
            await tb.quiet()
    await tb.check_outputs()
    dut._log.info("stats: %s", stats)
    assert stats["slverr"] and stats["pulses"] and stats["reads"] and stats["writes"], stats
    return tb


@cocotb.test()
async def reset_values(dut):
    """After reset every register reads its reset value (RO inputs held at 0).

    It must run first: table entries hold their power-up value only until written.
    """
    tb = AxiLiteTB(dut)
    await tb.start(clear_tables=False)
    for address in _addresses(tb.regmap):
        await tb.read(address)
    magic = await tb.read(tb.regmap["ID"].offset)
    assert magic == 0x53504543, hex(magic)


@cocotb.test()
async def random_access(dut):
    """Random reads and strobed writes, every access kind, idle and back-pressure."""
    await _random_ops(dut, ops=params().get("ops", 600), idle=0.3, stall=0.3)


@cocotb.test()
async def full_speed(dut):
    """No idle, no back-pressure."""
    await _random_ops(dut, ops=200, idle=0, stall=0)


@cocotb.test()
async def unmapped_is_slverr(dut):
    """Every unmapped word answers SLVERR, and writing it changes nothing."""
    tb = AxiLiteTB(dut)
    tb.set_idle(0.2)
    tb.set_backpressure(0.2)
    await tb.start()
    mapped = set(_addresses(tb.regmap))
    holes = [a for a in range(0, tb.regmap.span, 4) if a not in mapped]
    assert holes
    for address in tb.rng.sample(holes, min(40, len(holes))) + [holes[-1]]:
        await tb.write(address, 0xFFFFFFFF, 0xF)
        await tb.read(address)
    for address in sorted(mapped):
        await tb.read(address)


@cocotb.test()
async def concurrent_read_and_write(dut):
    """A read and a write in flight at once, to different registers."""
    tb = AxiLiteTB(dut)
    tb.set_idle(0.3)
    tb.set_backpressure(0.3)
    await tb.start()
    rng = tb.rng
    rw = [(r, f) for r in tb.regmap.registers for f in r.fields
          if f.access == "RW" and r.count == 1]
    for _ in range(100):
        (wreg, _), (rreg, _) = rng.sample(rw, 2)
        if wreg is rreg:
            continue
        data = rng.getrandbits(32)
        want_read, _ = tb.model.read(rreg.offset)
        write = cocotb.start_soon(tb.axil.write(wreg.offset, data.to_bytes(4, "little")))
        got = await tb.axil.read(rreg.offset, 4)
        await write
        tb.model.write(wreg.offset, data, 0xF)
        assert int.from_bytes(got.data, "little") == want_read
    await tb.check_outputs()
