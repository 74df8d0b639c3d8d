"""The register map as SystemRDL, compiled by systemrdl-compiler, and PeakRDL's outputs."""

import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from specgen.golden.config import PRESETS, preset
from specgen.hw.regmap import ACCESS, accelerator_regmap

pytest.importorskip("systemrdl", reason="systemrdl-compiler not installed")
from specgen.gen.emit.regmap_rdl import (RDL_ACCESS, check_against, compile_rdl, rdl_text,  # noqa: E402
                                 write_regmap_files)


def test_every_access_kind_has_rdl_properties():
    assert set(RDL_ACCESS) == set(ACCESS)


@pytest.mark.parametrize("name", list(PRESETS))
def test_rdl_compiles_and_agrees_with_the_register_file(tmp_path, name):
    regmap = accelerator_regmap(PRESETS[name])
    path = tmp_path / "specgen.rdl"
    path.write_text(rdl_text(regmap))
    assert check_against(compile_rdl(path), regmap) == []


def test_the_check_can_fail(tmp_path):
    regmap = accelerator_regmap(preset("sim"))
    text = rdl_text(regmap)
    # CTRL moved by one word, STATUS.DONE made read/write, one register dropped.
    text = text.replace("} ctrl @ 0x020;", "} ctrl @ 0x01c;")
    text = text.replace("sw = rw; hw = r; hwset; onwrite = woclr; desc", "sw = rw; hw = r; desc", 1)
    start = text.index("    reg {\n        name = \"MODE\";")
    text = text[:start] + text[text.index("} mode @ 0x024;\n") + len("} mode @ 0x024;\n"):]
    path = tmp_path / "broken.rdl"
    path.write_text(text)
    problems = check_against(compile_rdl(path), regmap)
    assert problems == [
        "register mode: missing from the RDL",
        "register CTRL: offset 0x1c x1, expected 0x20 x1",
        "field STATUS.DONE: bits [1:1] sw=rw reset=0x0, expected [1] sw=rw,woclr reset=0x0"]


def test_the_compiler_rejects_a_broken_file(tmp_path):
    from systemrdl import RDLCompileError
    path = tmp_path / "bad.rdl"
    path.write_text(rdl_text(accelerator_regmap(preset("sim"))).replace("sw = r;", "sw = x;", 1))
    with pytest.raises(RDLCompileError):
        compile_rdl(path)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("rdl")
    regmap = accelerator_regmap(preset("vck190"))
    return out, regmap, write_regmap_files(out, regmap)


def test_peakrdl_outputs(written):
    out, regmap, paths = written
    assert [p.relative_to(out).as_posix() for p in paths] == [
        "regmap/specgen.rdl", "regmap/specgen_regmap.h", "regmap/specgen_regmap.md",
        "regmap/specgen_regmap.xml"]
    markdown = (out / "regmap" / "specgen_regmap.md").read_text()
    for reg in regmap.registers:
        assert f"{reg.name}" in markdown


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_header_compiles_with_access_types(written, tmp_path):
    out, _, _ = written
    magic = int.from_bytes(b"SPEC", "big")    # ID.MAGIC reads ASCII "SPEC"
    src = tmp_path / "t.c"
    src.write_text(
        '#include "specgen_regmap.h"\n'
        f"_Static_assert(SPECGEN__ID__MAGIC_reset == 0x{magic:08x}u, \"magic\");\n"
        "_Static_assert(SPECGEN__ID__MAGIC_access == SPECGEN_ACCESS_CONST, \"id\");\n"
        "_Static_assert(SPECGEN__CTRL__START_access == SPECGEN_ACCESS_WO, \"start\");\n"
        "_Static_assert(SPECGEN__STATUS__DONE_access == SPECGEN_ACCESS_W1C, \"done\");\n"
        "_Static_assert(SPECGEN__CTRL__START_bp == 0, \"start bit\");\n"
        "int main(void) { return 0; }\n")
    proc = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only",
                           f"-I{out / 'regmap'}", str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_ipxact_holds_every_register(written):
    out, regmap, _ = written
    ns = {"ipxact": "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"}
    root = ET.parse(out / "regmap" / "specgen_regmap.xml").getroot()
    regs = {r.find("ipxact:name", ns).text: r for r in root.iter(f"{{{ns['ipxact']}}}register")}
    assert set(regs) == {r.name.lower() for r in regmap.registers}
    for reg in regmap.registers:
        node = regs[reg.name.lower()]
        assert int(node.find("ipxact:addressOffset", ns).text.replace("'h", ""), 16) == reg.offset
    done = next(f for f in regs["status"].iter(f"{{{ns['ipxact']}}}field")
                if f.find("ipxact:name", ns).text == "done")
    assert done.find("ipxact:modifiedWriteValue", ns).text == "oneToClear"


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_emitted_readme_describes_the_register_files(tmp_path, monkeypatch):
    import specgen.gen.emit.verilog
    from specgen.gen.cli.commands import main
    from specgen.hw.ring_fifo import RingFIFO
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: {"fifo": RingFIFO(width=4, depth=3)})
    assert main(["verilog", "--board", "vck190", "--out", str(tmp_path / "v"), "-q"]) == 0
    readme = (tmp_path / "v" / "README.md").read_text()
    files = [p.relative_to(tmp_path / "v").as_posix() for p in (tmp_path / "v").rglob("*")
             if p.is_file()]
    for name in files:
        assert f"`{name}`" in readme, name
