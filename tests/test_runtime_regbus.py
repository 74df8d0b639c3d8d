"""The board back-end's register access, against a fake device: a file mapped like ``/dev/mem``.

Offsets the test checks come from the C header ``specgen_regs.h`` (the route a board user
takes), and the bytes are read from the file with ``struct``, not through the code under test.
"""

import mmap
import re
import struct

import numpy as np
import pytest

from specgen.golden.config import preset
from specgen.golden.memory_map import ALIGN, REGION_CLASSES
from specgen.hw.regmap import accelerator_regmap

from specgen.gen.emit.regmap_doc import c_header
from specgen.gen.runtime.regbus import MMIO, RegisterBus, Registers, uio_map

from axil_amaranth import axil_read, axil_write

CONFIG = preset("sim")
REGMAP = accelerator_regmap(CONFIG)


def header():
    return {m.group(1): int(m.group(2), 0) for m in
            re.finditer(r"#define SPECGEN_(\w+) (0x[0-9a-f]+|\d+)u\b", c_header(CONFIG))}


def device_file(tmp_path, *, page_offset=1):
    """A file standing in for ``/dev/mem``: the register file sits one page in, at its reset values."""
    path = tmp_path / "mem"
    base = page_offset * mmap.ALLOCATIONGRANULARITY
    words = np.zeros(REGMAP.span // 4, "<u4")
    for reg in REGMAP.registers:
        for i in range(reg.count):
            words[reg.offset // 4 + i] = reg.reset
    path.write_bytes(b"\xee" * base + words.tobytes() + b"\xee" * 64)
    return path, base


def word_at(path, base, offset):
    data = path.read_bytes()
    return struct.unpack_from("<I", data, base + offset)[0]


def test_base_registers_land_at_the_header_offsets(tmp_path):
    path, base = device_file(tmp_path)
    h = header()
    bases = {"weights": 0x8_0000_0000, "state": 0x8_1234_5000, "checkpoint": 0xFFFF_F000,
             "io": 0x1_0000_0000_0000}
    with MMIO(path=path, offset=base, length=REGMAP.span) as bus:
        regs = Registers(bus=bus, regmap=REGMAP)
        regs.check_identity()
        regs.set_bases(bases)
        assert regs.bases() == bases
    for kind, addr in bases.items():
        lo = word_at(path, base, h[f"MEM_{kind.upper()}_BASE_LO_OFFSET"])
        hi = word_at(path, base, h[f"MEM_{kind.upper()}_BASE_HI_OFFSET"])
        assert (hi << 32 | lo) == addr, kind
    # Nothing outside the register file was touched.
    data = path.read_bytes()
    assert data[:base] == b"\xee" * base and data[base + REGMAP.span:] == b"\xee" * 64


def test_status_is_decoded_from_the_header_layout(tmp_path):
    path, base = device_file(tmp_path)
    h = header()
    word = (h["STATUS_DONE_MASK"] | h["STATUS_ERROR_MASK"]
            | (h["STATUS_ERROR_CODE_TREE_ORDER"] << h["STATUS_ERROR_CODE_SHIFT"]))
    with open(path, "r+b") as f:
        f.seek(base + h["STATUS_OFFSET"])
        f.write(struct.pack("<I", word))
    with MMIO(path=path, offset=base, length=REGMAP.span) as bus:
        status = Registers(bus=bus, regmap=REGMAP).status()
    assert status == {"BUSY": 0, "DONE": 1, "ERROR": 1, "WAIT_MATCH": 0, "ERROR_CODE": 3,
                      "DRAFT_TOKENS": 0, "error": "TREE_ORDER"}


def test_fields_are_written_in_place_and_checked():
    buf = bytearray(REGMAP.span)
    regs = Registers(bus=MMIO.over(buf), regmap=REGMAP)
    h = header()
    regs.write("MODE", MODE=1, DRAFT_LEN=8)
    assert struct.unpack_from("<I", buf, h["MODE_OFFSET"])[0] == (1 << h["MODE_MODE_SHIFT"]) | \
        (8 << h["MODE_DRAFT_LEN_SHIFT"])
    regs.write("TREE_PARENT", at=5, PARENT=2)
    assert struct.unpack_from("<I", buf, h["TREE_PARENT_OFFSET"] + 4 * 5)[0] == 2
    with pytest.raises(ValueError, match=r"STATUS.BUSY is RO \(read-only\); allowed: DONE, ERROR"):
        regs.write("STATUS", BUSY=1)
    with pytest.raises(ValueError, match=r"MODE.DRAFT_LEN must be an integer in \[0, 255\], not 256"):
        regs.write("MODE", DRAFT_LEN=256)
    with pytest.raises(ValueError, match="MODE has no field 'LEN'; allowed: MODE, DRAFT_LEN"):
        regs.write("MODE", LEN=1)
    with pytest.raises(ValueError, match=r"TREE_PARENT index must be an integer in \[0, 63\]"):
        regs.write("TREE_PARENT", at=64, PARENT=0)


def test_identity_check_fails_on_a_wrong_device():
    regs = Registers(bus=MMIO.over(bytearray(REGMAP.span)), regmap=REGMAP)
    with pytest.raises(RuntimeError, match="ID reads 0x00000000, not the map's 0x53504543"):
        regs.check_identity()


@pytest.mark.parametrize("bases,fragment", [
    ({"weights": ALIGN + 8}, "weights base must be a multiple of 4096"),
    ({"io": 1 << 64}, "io base must be a multiple of 4096 in [0, 2**64)"),
    ({"heap": 0}, "unknown class 'heap'; allowed: " + ", ".join(REGION_CLASSES)),
])
def test_bad_base_addresses_are_refused(bases, fragment):
    regs = Registers(bus=MMIO.over(bytearray(REGMAP.span)), regmap=REGMAP)
    with pytest.raises(ValueError) as exc:
        regs.set_bases(bases)
    assert fragment in str(exc.value)


def test_bus_checks_offsets_and_values():
    bus = MMIO.over(bytearray(16))
    bus.write(12, 0xDEADBEEF)
    assert bus.read(12) == 0xDEADBEEF
    with pytest.raises(ValueError, match=r"multiple of 4 in \[0, 0xc\], not 0x2"):
        bus.read(2)
    with pytest.raises(ValueError, match=r"not 0x10"):
        bus.write(16, 0)
    with pytest.raises(ValueError, match=r"\[0, 0xffffffff\], not 4294967296"):
        bus.write(0, 1 << 32)
    with pytest.raises(ValueError, match="less than the register map's span"):
        Registers(bus=bus, regmap=REGMAP)
    with pytest.raises(ValueError, match="multiple of the page size"):
        MMIO(path="/dev/null", offset=12, length=16)
    # The base class is abstract: a bus without _read and _write cannot be made.
    with pytest.raises(TypeError, match="abstract"):
        RegisterBus(span=4)

    class ReadOnly(RegisterBus):
        def _read(self, offset):
            return 0
    with pytest.raises(TypeError, match="_write"):
        ReadOnly(span=4)


def test_uio_map_reads_sysfs(tmp_path):
    folder = tmp_path / "uio3" / "maps" / "map1"
    folder.mkdir(parents=True)
    (folder / "addr").write_text("0x00000000a4000000\n")
    (folder / "size").write_text("0x0000000000000800\n")
    got = uio_map("/dev/uio3", map_index=1, sysfs=tmp_path)
    assert got == {"path": "/dev/uio3", "offset": mmap.PAGESIZE, "length": 0x800,
                   "addr": 0xA400_0000}
    with pytest.raises(FileNotFoundError, match="generic-uio"):
        uio_map("uio4", sysfs=tmp_path)


class RecordingBus(RegisterBus):
    """A bus that remembers every write in order (and reads back the last value written)."""

    def __init__(self, span):
        super().__init__(span=span)
        self.writes, self.words = [], {}

    def _read(self, offset):
        return self.words.get(offset, 0)

    def _write(self, offset, value):
        self.writes.append((offset, value))
        self.words[offset] = value


def replay_on_register_file(writes, reads):
    """Replay ``writes`` over AXI4-Lite on the RTL register file (Amaranth's simulator), then
    read ``reads``; return the words read and the RTL's base-address outputs."""
    from amaranth.sim import Simulator

    from specgen.hw.axi_lite import AXI4LiteRegisterFile

    dut = AXI4LiteRegisterFile(regmap=REGMAP)
    bus = dut.s_axi
    got, ports = {}, {}

    async def bench(ctx):
        for offset, value in writes:
            await axil_write(ctx, bus, offset, value)
        for offset in reads:
            got[offset] = await axil_read(ctx, bus, offset)
        for kind in REGION_CLASSES:
            for half in ("lo", "hi"):
                ports[kind, half] = ctx.get(getattr(dut, f"mem_{kind}_base_{half}_addr"))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, ports


def test_base_registers_on_the_rtl_register_file():
    """What Registers writes, replayed on the RTL register file, holds the bases it meant."""
    bases = {"weights": 0x8_0000_0000, "state": 0x8_1234_5000, "checkpoint": 0xFFFF_F000,
             "io": 0xABCD_0000_1000}
    rec = RecordingBus(REGMAP.span)
    Registers(bus=rec, regmap=REGMAP).set_bases(bases)
    names = [f"MEM_{k.upper()}_BASE_{h}" for k in REGION_CLASSES for h in ("LO", "HI")]
    reads = [REGMAP[n].offset for n in names] + [REGMAP["ID"].offset, REGMAP["VERSION"].offset]
    got, ports = replay_on_register_file(rec.writes, reads)
    # The words the RTL returns, seen through a fake device, decode to the same bases.
    buf = bytearray(REGMAP.span)
    for offset, word in got.items():
        struct.pack_into("<I", buf, offset, word)
    regs = Registers(bus=MMIO.over(buf), regmap=REGMAP)
    assert regs.bases() == bases
    regs.check_identity()
    for kind, addr in bases.items():
        assert ports[kind, "lo"] == (addr & 0xFFFF_FFFF) >> 12 and ports[kind, "hi"] == addr >> 32


def test_mmio_over_a_word_model():
    """``MMIO.over_words``: every load and store is one indexed access of the model, at
    the register's word index; the bus's offset checks still hold."""
    class Words(dict):
        def __missing__(self, index):
            return 0

    words = Words()
    regs = Registers(bus=MMIO.over_words(words, span=REGMAP.span), regmap=REGMAP)
    regs.set_bases({"weights": 0x8_0000_0000})
    lo, hi = REGMAP["MEM_WEIGHTS_BASE_LO"].offset, REGMAP["MEM_WEIGHTS_BASE_HI"].offset
    assert words == {lo // 4: 0, hi // 4: 8}
    with pytest.raises(ValueError, match="register offset must be a multiple of 4"):
        regs.bus.read(REGMAP.span)
    with pytest.raises(TypeError, match="words must support indexing"):
        MMIO.over_words(3, span=16)
