"""The register-map description, its validation and its generators (Markdown, C header, RTL)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from specgen.gen.emit.regmap_doc import c_header, render_regmap_doc
from specgen.golden.config import PRESETS, preset
from specgen.hw.axi_lite import AXI4LiteRegisterFile, AXI4LiteSignature, field_port_name
from specgen.hw.regmap import ERROR_CODES, Enum, Field, Register, RegisterMap, accelerator_regmap

ROOT = Path(__file__).resolve().parent.parent

# Components whose constructor raised are never elaborated; amaranth warns when
# the garbage collector frees them, during whichever test runs then.
pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")


def reg(name="R", offset=0, fields=None, **kw):
    fields = fields if fields is not None else (Field(name="F", lsb=0, width=8, access="RW"),)
    return Register(name=name, offset=offset, fields=fields, **kw)


@pytest.mark.parametrize("build,exc,message", [
    (lambda: RegisterMap(name="M", registers=(reg("A", 0), reg("A", 4))), ValueError,
     "RegisterMap M: duplicate register name 'A'"),
    (lambda: RegisterMap(name="M", registers=(reg("A", 0x10), reg("B", 0x10))), ValueError,
     "RegisterMap M: register B at 0x010 overlaps register A (0x010..0x013)"),
    (lambda: RegisterMap(name="M", registers=(reg("T", 0x10, count=4), reg("B", 0x18))), ValueError,
     "RegisterMap M: register B at 0x018 overlaps register T (0x010..0x01f)"),
    (lambda: reg("R", fields=(Field(name="F", lsb=28, width=8, access="RW"),)), ValueError,
     "Register R: field F [35:28] is outside the register's 32 bits"),
    (lambda: reg("R", fields=(Field(name="F", lsb=0, width=8, access="RW"),
                              Field(name="F", lsb=8, width=8, access="RW"))), ValueError,
     "Register R: duplicate field name 'F'"),
    (lambda: reg("R", fields=(Field(name="A", lsb=0, width=8, access="RW"),
                              Field(name="B", lsb=4, width=8, access="RO"))), ValueError,
     "Register R: field B [11:4] overlaps field A"),
    (lambda: reg("R", offset=6), ValueError, "Register R: offset 0x6 is not a multiple of 4"),
    (lambda: reg("T", count=4, fields=(Field(name="F", lsb=0, width=4, access="RO"),)), ValueError,
     "Register T: a table (count 4) holds RW fields only; field F is RO"),
    (lambda: reg("r"), ValueError,
     "Register.name must be an upper-case C identifier ([A-Z][A-Z0-9_]*), not 'r'"),
    (lambda: reg("R", fields=()), TypeError, "Register R.fields must be a non-empty tuple of Field"),
    (lambda: Field(name="F", lsb=0, width=4, access="RW", reset=16), ValueError,
     "Field F: reset 0x10 does not fit in 4 bits"),
    (lambda: Field(name="F", lsb=0, width=4, access="RC"), ValueError,
     "Field F.access must be one of 'RO', 'CONST', 'RW', 'WO', 'W1C', not 'RC'"),
    (lambda: Field(name="F", lsb=0, width=0, access="RW"), ValueError,
     "Field F.width must be an integer >= 1, not 0"),
    (lambda: Field(name="F", lsb=0, width=1, access="WO", reset=1), ValueError,
     "Field F: a WO field reads as 0, so its reset must be 0, not 0x1"),
    (lambda: Field(name="F", lsb=0, width=2, access="RO",
                   enums=(Enum(name="A", value=0, description=""),
                          Enum(name="B", value=4, description=""))), ValueError,
     "Field F: enum B = 4 does not fit in 2 bits"),
    (lambda: Field(name="F", lsb=0, width=2, access="RO",
                   enums=(Enum(name="A", value=0, description=""),
                          Enum(name="A", value=1, description=""))), ValueError,
     "Field F: duplicate enum name 'A'"),
])
def test_validation_names_register_and_field(build, exc, message):
    with pytest.raises(exc) as info:
        build()
    assert str(info.value).startswith(message), str(info.value)


def test_keyword_only():
    with pytest.raises(TypeError):
        Field("F", 0, 8, "RW")
    with pytest.raises(TypeError):
        AXI4LiteRegisterFile(accelerator_regmap(preset("sim")))


@pytest.mark.parametrize("name", list(PRESETS))
def test_accelerator_map(name):
    config = preset(name)
    rm = accelerator_regmap(config)
    assert rm["ID"].reset == 0x53504543
    caps = rm["CAPS_LINEAR"]
    assert caps.field("ROWS").reset == config.linear.rows
    assert caps.field("COLS").reset == config.linear.cols
    assert rm["CAPS_TREE"].field("MAX_NODES").reset == config.tree.max_nodes
    assert rm["TREE_PARENT"].count == config.tree.max_nodes
    assert (1 << rm["TREE_PARENT"].field("PARENT").width) >= config.tree.max_nodes
    assert rm["STATUS"].field("ERROR_CODE").enums == ERROR_CODES
    assert rm["MODE"].field("MODE").enums[1].name == "TARGET"
    # Every 64-bit counter is a LO/HI pair at consecutive words.
    for r in rm.registers:
        if r.name.endswith("_LO"):
            assert rm[r.name[:-3] + "_HI"].offset == r.offset + 4
    assert rm.span == 0x800 and rm.addr_width == 11
    assert {f.access for r in rm.registers for f in r.fields} == {"RO", "CONST", "RW", "WO", "W1C"}


def test_accelerator_map_rejects_non_config():
    with pytest.raises(TypeError, match="accelerator_regmap: config must be a golden.config.Config"):
        accelerator_regmap("sim")


def test_docs_regmap_is_current():
    text = (ROOT / "docs" / "regmap.md").read_text()
    assert text == render_regmap_doc(), "docs/regmap.md is stale: run specgen docs regmap"


def test_markdown_lists_every_register_and_field():
    rm = accelerator_regmap(preset("vhk158"))
    text = rm.to_markdown()
    for r in rm.registers:
        assert f"`{r.name}`" in text or f"`{r.name}[0..{r.count - 1}]`" in text
        for f in r.fields:
            assert re.search(rf"\| {re.escape(f.bits)} \| `{f.name}` \| {f.access} \|", text), \
                (r.name, f.name)
    assert "| `0x400`..`0x4fc` | `TREE_PARENT[0..63]` | RW |" in text


CC = shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("name", ["sim", "vhk158"])
def test_c_header_compiles_and_matches(tmp_path, name):
    """The header compiles, and its values equal the description (checked by the compiler)."""
    rm = accelerator_regmap(preset(name))
    (tmp_path / "specgen_regs.h").write_text(c_header(preset(name)))
    checks = []
    for r in rm.registers:
        q = f"SPECGEN_{r.name}"
        checks.append(f"_Static_assert({q}_OFFSET == {r.offset}u, \"{q}\");")
        checks.append(f"_Static_assert({q}_RESET == {r.reset}u, \"{q}\");")
        if r.count > 1:
            checks.append(f"_Static_assert({q}(3) == {r.offset + 12}u, \"{q}(i)\");")
            checks.append(f"_Static_assert({q}_COUNT == {r.count}u, \"{q}_COUNT\");")
        for f in r.fields:
            fq = f"{q}_{f.name}"
            checks.append(f"_Static_assert({fq}_MASK == {f.mask}u && {fq}_SHIFT == {f.lsb}u "
                          f"&& {fq}_WIDTH == {f.width}u && {fq}_RESET == {f.reset}u, \"{fq}\");")
            for e in f.enums:
                checks.append(f"_Static_assert({fq}_{e.name} == {e.value}u, \"{fq}_{e.name}\");")
    checks.append(f"_Static_assert(SPECGEN_REGMAP_SPAN == {rm.span}u, \"span\");")
    src = tmp_path / "check.c"
    src.write_text("#include \"specgen_regs.h\"\n#include \"specgen_regs.h\"\n"
                   + "\n".join(checks) + "\nint main(void) { return 0; }\n")
    proc = subprocess.run([CC, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", str(src)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # The compiler really checks: a wrong value fails.
    src.write_text("#include \"specgen_regs.h\"\n_Static_assert(SPECGEN_CTRL_OFFSET == 0x24u, \"x\");\n")
    proc = subprocess.run([CC, "-std=c11", "-fsyntax-only", str(src)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode != 0


def test_c_header_rejects_non_config():
    with pytest.raises(TypeError, match="c_header: config must be a golden.config.Config"):
        c_header("vhk158")


def test_register_file_ports_follow_the_map():
    rm = accelerator_regmap(preset("sim"))
    regs = AXI4LiteRegisterFile(regmap=rm)
    assert regs.signature.members["s_axi"].signature == AXI4LiteSignature(addr_width=11).flip()
    members = regs.signature.members
    status = rm["STATUS"]
    assert members[field_port_name(status, status.field("BUSY"))].flow.name == "In"
    assert members["status_done"].flow.name == "Out"
    assert members["status_done_set"].flow.name == "In"
    assert members["ctrl_start"].flow.name == "Out"
    assert members["mode_draft_len"].init == 16
    assert members["tree_parent_addr"].shape.stop == rm["TREE_PARENT"].count
    assert "id_magic" not in members  # constants have no port
    from amaranth.hdl import Fragment
    Fragment.get(regs, None)  # it elaborates (and is used, so no UnusedElaboratable warning)


def test_register_file_rejects_bad_regmap():
    with pytest.raises(TypeError, match="AXI4LiteRegisterFile.regmap must be a hw.regmap.RegisterMap"):
        AXI4LiteRegisterFile(regmap=None)
    clash = RegisterMap(name="M", registers=(
        reg("A_B", 0, fields=(Field(name="C", lsb=0, width=1, access="RW"),)),
        reg("A", 4, fields=(Field(name="B_C", lsb=0, width=1, access="RW"),))))
    with pytest.raises(ValueError, match="port name 'a_b_c' collides"):
        AXI4LiteRegisterFile(regmap=clash)


@pytest.mark.parametrize("kwargs,message", [
    ({"addr_width": 1}, "AXI4LiteSignature.addr_width must be an integer in [2, 64], not 1"),
    ({"addr_width": 8, "data_width": 16}, "AXI4LiteSignature.data_width must be 32 or 64, not 16"),
])
def test_signature_validation(kwargs, message):
    with pytest.raises(ValueError) as info:
        AXI4LiteSignature(**kwargs)
    assert str(info.value) == message


def test_register_file_verilog_lints_and_packages(tmp_path):
    """The emitted register file passes Verilator's lint, and the Vivado flow sees its AXI port."""
    from amaranth.back import verilog

    from specgen.gen.emit.vivado import bus_interfaces, verilog_ports
    from specgen.sim.lint import lint
    text = verilog.convert(AXI4LiteRegisterFile(regmap=accelerator_regmap(preset("sim"))),
                           name="regfile", emit_src=False)
    path = tmp_path / "regfile.v"
    path.write_text(text)
    ok, output = lint(path, top="regfile")
    assert ok, output
    buses = bus_interfaces(verilog_ports(text, "regfile"))
    assert [(b.name, b.kind, b.mode, b.addr_width) for b in buses] == [
        ("s_axi", "axi4lite", "slave", 11)]
    assert len(buses[0].port_maps) == 19
