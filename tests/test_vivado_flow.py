"""The generated Vivado flow, run under plain tclsh against stub Vivado commands.

``vivado_stubs.tcl`` defines every Vivado command the flow uses as a proc that
checks its inputs (files exist, options are known, the command it depends on
ran before) and logs its name and arguments. A misspelled command is not
defined, so tclsh stops on it. The tests then check the logged sequence and
arguments: part, top, clock period and file list.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from specgen.gen.emit.vivado import FLOW_FILES, bus_interfaces, verilog_ports, write_vivado_flow
from specgen.golden.config import preset

TCLSH = shutil.which("tclsh")
STUBS = Path(__file__).with_name("vivado_stubs.tcl")

pytestmark = [
    pytest.mark.skipif(TCLSH is None, reason="tclsh not installed (apt-get install tcl)"),
    # The board-scale arrays are built by specgen.gen.emit.verilog.blocks and dropped unelaborated.
    pytest.mark.filterwarnings("ignore:.*created but never used"),
]

#: Commands whose order is the flow; the rest (properties, port maps) are checked by argument.
KEY = {"read_verilog", "read_xdc", "create_clock", "set_input_delay", "set_output_delay",
       "synth_design", "write_checkpoint", "report_utilization", "report_timing_summary",
       "report_design_analysis", "report_drc", "report_methodology", "report_power", "opt_design", "place_design", "route_design", "close_design",
       "create_project", "add_files", "update_compile_order", "ipx::package_project",
       "ipx::remove_bus_interface", "ipx::add_bus_interface", "ipx::create_xgui_files",
       "ipx::update_checksums", "ipx::check_integrity", "ipx::save_core", "close_project"}

SYNTH = ["read_xdc", "create_clock", "set_input_delay", "set_output_delay", "synth_design",
         "write_checkpoint", "report_utilization", "report_timing_summary"]
IMPL = ["opt_design", "place_design", "write_checkpoint", "route_design", "write_checkpoint",
        "report_utilization", "report_utilization", "report_timing_summary",
        "report_design_analysis", "report_drc", "report_methodology", "report_power"]
IP_HEAD = ["create_project", "add_files", "update_compile_order", "ipx::package_project",
           "ipx::remove_bus_interface", "ipx::remove_bus_interface"]
IP_TAIL = ["ipx::create_xgui_files", "ipx::update_checksums", "ipx::check_integrity",
           "ipx::save_core", "close_project"]


class FlowError(AssertionError):
    pass


def _small_blocks(blocks):
    """``specgen.gen.emit.verilog.blocks`` with the small blocks only: the board-scale arrays and the
    top level that holds them take minutes to emit."""
    def small(config):
        from specgen.hw.exponent_decoder import ExponentDecoder
        from specgen.hw.fp16_reconstructor import FP16Reconstructor
        from specgen.hw.ring_fifo import RingFIFO
        from specgen.hw.tree_verifier import TreeVerifier
        keep = (RingFIFO, TreeVerifier, ExponentDecoder, FP16Reconstructor)
        out = {}
        for name, c in blocks(config).items():
            if isinstance(c, keep):
                out[name] = c
            else:
                c._MustUse__silence = True  # dropped unelaborated on purpose
        return out
    return small


def emit(board, out):
    """``specgen.gen.emit.verilog.write_verilog`` for ``board`` with the small blocks only."""
    import specgen.gen.emit.verilog
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(specgen.gen.emit.verilog, "blocks", _small_blocks(specgen.gen.emit.verilog.blocks))
        modules = specgen.gen.emit.verilog.write_verilog(board=board, out=out)
    return sorted(modules)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """The ``vck190`` small blocks' Verilog (emitted once per module) and their names.

    Both boards' flows are written over it: the flow reads the part and clock
    from the config it is given, and emission takes seconds.
    """
    out = tmp_path_factory.mktemp("verilog-vck190") / "out"
    return out, emit("vck190", out)


def make_flow(tmp_path, emitted, board, top_prefix="tree_verifier"):
    """Copy the emitted folder to ``tmp_path`` and write ``board``'s flow there."""
    src, modules = emitted
    out = tmp_path / board
    shutil.copytree(src, out)
    top = next(m for m in modules if m.startswith(top_prefix))
    sources = [f"{m}.v" for m in modules]
    written = write_vivado_flow(out, config=preset(board), top=top, sources=sources)
    return out, top, sources, written


def run_flow(folder, *, top, script="build.tcl", stage=None):
    """Source ``script`` under tclsh with the stubs; return the logged ``(name, args)`` calls."""
    ports = [p.name for p in verilog_ports(_module_text(folder, top), top)]
    log = folder.parent / f"{folder.name}-calls.log"
    log.unlink(missing_ok=True)
    driver = folder.parent / f"{folder.name}-driver.tcl"
    argv = [] if stage is None else [stage]
    driver.write_text("\n".join([
        f"set stub_log {{{log}}}",
        f"set stub_ports {{{' '.join(ports)}}}",
        f"set argv {{{' '.join(argv)}}}",
        f"set argc {len(argv)}",
        f"source {{{STUBS}}}",
        f"source {{{folder / script}}}",
        "",
    ]))
    proc = subprocess.run([TCLSH, str(driver)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise FlowError(proc.stderr.strip() or proc.stdout.strip())
    return [tuple(line.split("\x1f")) for line in log.read_text().splitlines()]


def _module_text(folder, top):
    for path in sorted(folder.glob("*.v")):
        text = path.read_text()
        if re.search(rf"^module {re.escape(top)}\(", text, re.MULTILINE):
            return text
    raise AssertionError(f"no source defines {top}")


def key_names(calls):
    return [c[0] for c in calls if c[0] in KEY]


def args_of(calls, name):
    return [list(c[1:]) for c in calls if c[0] == name]


@pytest.mark.parametrize("board,part,period", [
    ("vck190", "xcvc1902-vsva2197-2MP-e-S", "2.500"),
    ("vhk158", "xcvh1582-vsva3697-2MP-e-S", "4.000"),
])
def test_full_flow_sequence_and_arguments(tmp_path, emitted, board, part, period):
    out, top, sources, written = make_flow(tmp_path, emitted, board)
    assert written == list(FLOW_FILES)
    assert all((out / f).is_file() for f in written)
    calls = run_flow(out, top=top)
    n = len(sources)
    names = key_names(calls)
    # Two interfaces pretended inferred are removed, then clk and rst declared.
    assert names == (["read_verilog"] * n + SYNTH + IMPL + ["close_design"] + IP_HEAD
                     + ["ipx::add_bus_interface"] * 2 + IP_TAIL)
    assert args_of(calls, "read_verilog") == [[str(out.resolve() / s)] for s in sources]
    assert args_of(calls, "synth_design") == [
        ["-mode", "out_of_context", "-part", part, "-top", top]]
    assert args_of(calls, "read_xdc") == [["-mode", "out_of_context",
                                           str(out.resolve() / "constraints.xdc")]]
    assert args_of(calls, "create_clock") == [["-name", "clk", "-period", period, "port: clk"]]
    assert args_of(calls, "create_project")[0][-1] == part
    assert args_of(calls, "add_files") == [["-norecurse",
                                            " ".join(str(out.resolve() / s) for s in sources)]]
    vivado = out.resolve() / "vivado"
    assert [a[-1] for a in args_of(calls, "write_checkpoint")] == [
        str(vivado / f"post_{s}.dcp") for s in ("synth", "place", "route")]
    reports = [a[a.index("-file") + 1] for a in args_of(calls, "report_utilization")]
    assert reports == [str(vivado / "reports" / f) for f in
                       ("utilization_synth_hier.rpt", "utilization.rpt", "utilization_hier.rpt")]
    assert [("-hierarchical" in a) for a in args_of(calls, "report_utilization")] == [
        True, False, True]
    signoff = [(name, args_of(calls, name)) for name in
               ("report_drc", "report_methodology", "report_power")]
    assert [(name, a[0][a[0].index("-file") + 1]) for name, a in signoff] == [
        ("report_drc", str(vivado / "reports" / "drc.rpt")),
        ("report_methodology", str(vivado / "reports" / "methodology.rpt")),
        ("report_power", str(vivado / "reports" / "power.rpt"))]
    package = args_of(calls, "ipx::package_project")[0]
    assert package[package.index("-root_dir") + 1] == str(vivado / "ip")
    props = {(a[0], a[1]) for a in args_of(calls, "set_property")}
    assert ("top", top) in props and ("name", top) in props
    assert ("value", str(round(preset(board).board.clock_mhz * 1e6))) in props  # FREQ_HZ
    assert ("value", "ACTIVE_HIGH") in props
    assert {("physical_name", "clk"), ("physical_name", "rst")} <= props


def test_stages(tmp_path, emitted):
    out, top, sources, _ = make_flow(tmp_path, emitted, "vck190")
    n = len(sources)
    assert key_names(run_flow(out, top=top, stage="synth")) == (
        ["read_verilog"] * n + SYNTH + ["close_design"])
    assert key_names(run_flow(out, top=top, stage="impl")) == (
        ["read_verilog"] * n + SYNTH + IMPL + ["close_design"])
    ip = key_names(run_flow(out, top=top, stage="ip"))
    assert ip == IP_HEAD + ["ipx::add_bus_interface"] * 2 + IP_TAIL
    # package_ip.tcl runs on its own too.
    assert key_names(run_flow(out, top=top, script="package_ip.tcl")) == ip
    with pytest.raises(FlowError, match=r"unknown stage 'route'; allowed: synth, impl, ip, all"):
        run_flow(out, top=top, stage="route")


def test_missing_source_fails(tmp_path, emitted):
    out, top, sources, _ = make_flow(tmp_path, emitted, "vck190")
    victim = next(s for s in sources if not s.startswith("tree_verifier"))
    (out / victim).unlink()
    with pytest.raises(FlowError, match=rf"read_verilog: no such file: .*{re.escape(victim)}"):
        run_flow(out, top=top)


@pytest.mark.parametrize("old,new,message", [
    ("    place_design\n", "    place_desing\n", 'invalid command name "place_desing"'),
    ("    place_design\n", "", "route_design before place_design"),
    ("opt_design\n        place_design\n", "place_design\n        opt_design\n",
     "place_design before opt_design"),
    ("    foreach src $sources { read_verilog $src }\n    read_xdc",
     "    read_xdc", "synth_design before read_verilog"),
    ("-top $top", "-tpo $top", "synth_design: unknown option '-tpo'"),
    ("file mkdir $build_dir $report_dir\n", "", "folder of .* does not exist"),
    ("        route_design\n", "        report_power -file x.rpt\n        route_design\n",
     "report_power before route_design"),
])
def test_broken_flow_fails(tmp_path, emitted, old, new, message):
    out, top, _, _ = make_flow(tmp_path, emitted, "vck190")
    script = out / "build.tcl"
    text = script.read_text()
    assert old in text
    script.write_text(text.replace(old, new, 1))
    with pytest.raises(FlowError, match=message):
        run_flow(out, top=top)


def test_packaging_out_of_order_fails(tmp_path, emitted):
    out, top, _, _ = make_flow(tmp_path, emitted, "vck190")
    script = out / "package_ip.tcl"
    text = script.read_text().replace("ipx::check_integrity $core\n", "")
    script.write_text(text)
    with pytest.raises(FlowError, match="ipx::save_core before ipx::check_integrity"):
        run_flow(out, top=top, stage="ip")


def test_xdc_names_a_missing_port_fails(tmp_path, emitted):
    out, top, _, _ = make_flow(tmp_path, emitted, "vck190")
    xdc = out / "constraints.xdc"
    xdc.write_text(xdc.read_text().replace("[get_ports clk]", "[get_ports clock]"))
    with pytest.raises(FlowError, match="get_ports: no port 'clock' on the top"):
        run_flow(out, top=top)


AXI_TOP = """\
module axi_top(clk, rst, s_axi__awaddr, s_axi__awprot, s_axi__awvalid, s_axi__awready,
  s_axi__wdata, s_axi__wstrb, s_axi__wvalid, s_axi__wready, s_axi__bresp, s_axi__bvalid,
  s_axi__bready, s_axi__araddr, s_axi__arprot, s_axi__arvalid, s_axi__arready, s_axi__rdata,
  s_axi__rresp, s_axi__rvalid, s_axi__rready, m_axis_tdata, m_axis_tvalid, m_axis_tready,
  m_axis_tlast, s_axis__tdata, s_axis__tvalid, s_axis__tready, x__awaddr);
  input clk;
  input rst;
  input [7:0] s_axi__awaddr;
  input [2:0] s_axi__awprot;
  input s_axi__awvalid;
  output s_axi__awready;
  input [31:0] s_axi__wdata;
  input [3:0] s_axi__wstrb;
  input s_axi__wvalid;
  output s_axi__wready;
  output [1:0] s_axi__bresp;
  output s_axi__bvalid;
  input s_axi__bready;
  input [7:0] s_axi__araddr;
  input [2:0] s_axi__arprot;
  input s_axi__arvalid;
  output s_axi__arready;
  output [31:0] s_axi__rdata;
  output [1:0] s_axi__rresp;
  output s_axi__rvalid;
  input s_axi__rready;
  output [63:0] m_axis_tdata;
  output m_axis_tvalid;
  input m_axis_tready;
  output m_axis_tlast;
  input [15:0] s_axis__tdata;
  input s_axis__tvalid;
  output s_axis__tready;
  input [3:0] x__awaddr;
endmodule
"""


def test_axi_ports_become_bus_interfaces(tmp_path):
    out = tmp_path / "axi"
    out.mkdir()
    (out / "axi_top.v").write_text(AXI_TOP)
    ports = verilog_ports(AXI_TOP, "axi_top")
    assert ports[2].name == "s_axi__awaddr" and ports[2].width == 8
    buses = {b.name: b for b in bus_interfaces(ports)}
    # x__awaddr alone is no AXI4-Lite interface.
    assert sorted(buses) == ["m_axis", "s_axi", "s_axis"]
    assert (buses["s_axi"].kind, buses["s_axi"].mode, buses["s_axi"].addr_width) == (
        "axi4lite", "slave", 8)
    assert (buses["m_axis"].kind, buses["m_axis"].mode) == ("axis", "master")
    assert (buses["s_axis"].kind, buses["s_axis"].mode) == ("axis", "slave")
    assert dict(buses["m_axis"].port_maps) == {"TDATA": "m_axis_tdata", "TVALID": "m_axis_tvalid",
                                               "TREADY": "m_axis_tready", "TLAST": "m_axis_tlast"}
    write_vivado_flow(out, config=preset("vhk158"), top="axi_top", sources=["axi_top.v"])
    calls = run_flow(out, top="axi_top", stage="ip")
    assert [a[0] for a in args_of(calls, "ipx::add_bus_interface")] == [
        "clk", "rst", "m_axis", "s_axi", "s_axis"]
    mapped = {a[1] for a in args_of(calls, "set_property") if a[0] == "physical_name"}
    assert mapped == {p.name for p in ports} - {"x__awaddr"}
    props = [tuple(a) for a in args_of(calls, "set_property")]
    assert any(p[:2] == ("value", "m_axis:s_axi:s_axis") for p in props)  # ASSOCIATED_BUSIF
    assert any(p[:2] == ("value", "AXI4LITE") for p in props)
    assert any(p[:2] == ("range", "4096") for p in props)
    assert ("interface_mode", "master", "m_axis") in props
    readme = (out / "README.md").read_text()
    assert "`s_axi`: axi4lite slave, 4096-byte address range" in readme


def test_memory_map_holds_the_registers(tmp_path):
    from specgen.hw.regmap import accelerator_regmap
    out = tmp_path / "out"
    out.mkdir()
    (out / "axi_top.v").write_text(AXI_TOP)
    regmap = accelerator_regmap(preset("vck190"))
    write_vivado_flow(out, config=preset("vck190"), top="axi_top", sources=["axi_top.v"],
                      registers=regmap)
    calls = run_flow(out, top="axi_top", stage="ip")
    added = [a[0] for a in args_of(calls, "ipx::add_register")]
    # One register per word: a table of N entries is N registers.
    assert len(added) == sum(r.count for r in regmap.registers)
    assert "CTRL" in added and "TREE_PARENT_0" in added
    assert f"TREE_PARENT_{regmap['TREE_PARENT'].count - 1}" in added
    offsets = {a[2].split("ipx::add_register:")[1].split(":")[0]: int(a[1], 16)
               for a in args_of(calls, "set_property")
               if a[0] == "address_offset"}
    assert offsets["CTRL"] == regmap["CTRL"].offset
    assert offsets["TREE_PARENT_1"] == regmap["TREE_PARENT"].offset + 4


IRQ_TOP = """\
module irq_top(clk, rst, irq, wide_irq);
  input clk;
  input rst;
  output irq;
  output [1:0] wide_irq;
endmodule
"""


def test_irq_is_an_interrupt_interface(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "irq_top.v").write_text(IRQ_TOP)
    write_vivado_flow(out, config=preset("vck190"), top="irq_top", sources=["irq_top.v"])
    calls = run_flow(out, top="irq_top", stage="ip")
    assert [a[0] for a in args_of(calls, "ipx::add_bus_interface")] == ["clk", "rst", "irq"]
    props = [tuple(a) for a in args_of(calls, "set_property")]
    irq = props[props.index(("abstraction_type_vlnv", "xilinx.com:signal:interrupt_rtl:1.0",
                             "irq")):]
    assert ("bus_type_vlnv", "xilinx.com:signal:interrupt:1.0", "irq") in irq
    assert ("interface_mode", "master", "irq") in irq
    assert ("physical_name", "irq", "ipx::add_port_map:INTERRUPT:irq") in irq
    assert ("value", "LEVEL_HIGH", "ipx::add_bus_parameter:SENSITIVITY:irq") in irq
    # A wider port of another name stays a plain port.
    assert not any(p[:2] == ("physical_name", "wide_irq") for p in props)


def test_readme_describes_every_file(tmp_path, emitted):
    out, top, sources, written = make_flow(tmp_path, emitted, "vhk158")
    readme = (out / "README.md").read_text()
    for name in [*sources, *written, "manifest.json"]:
        assert f"`{name}`" in readme, name
    assert "vivado -mode batch -source build.tcl" in readme
    assert "xcvh1582-vsva3697-2MP-e-S" in readme and "250 MHz" in readme
    assert top in readme


def test_flow_file_is_deterministic(tmp_path, emitted):
    a, _, _, written = make_flow(tmp_path / "a", emitted, "vck190")
    b, _, _, _ = make_flow(tmp_path / "b", emitted, "vck190")
    for name in written:
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_rejects_sim_preset(tmp_path):
    (tmp_path / "m.v").write_text("module m(clk);\n  input clk;\nendmodule\n")
    with pytest.raises(ValueError) as info:
        write_vivado_flow(tmp_path, config=preset("sim"), top="m", sources=["m.v"])
    assert str(info.value) == (
        "write_vivado_flow: board 'sim' has no Vivado part (BoardConfig.part is None); "
        "the flow needs one of: vck190, vhk158")


@pytest.mark.parametrize("setup,kwargs,exc,message", [
    (None, {"top": "nope"}, ValueError, "top module 'nope' is not defined in any source"),
    (None, {"top": "1bad"}, ValueError, "top must be a Verilog module name, not '1bad'"),
    (None, {"top": "comb"}, ValueError, "top module 'comb' has no 'clk' input"),
    (None, {"sources": ["missing.v"]}, FileNotFoundError, "source 'missing.v' does not exist"),
    (None, {"sources": ["m.v", "m.v"]}, ValueError, "source 'm.v' is listed twice"),
    (None, {"sources": []}, ValueError, "sources must list at least one Verilog file"),
    (None, {"sources": "m.v"}, TypeError, "sources must be a list of paths"),
    (None, {"sources": ["notes.txt"]}, ValueError, "source 'notes.txt' must be a .v or .sv file"),
    ("dup", {"sources": ["m.v", "dup.v"]}, ValueError,
     "module 'm' is defined in both 'm.v' and 'dup.v'"),
    ("outside", {"sources": ["../outside.v"]}, ValueError, "is outside out_dir"),
    (None, {"config": "vck190"}, TypeError, "config must be a golden.config.Config"),
    (None, {"out_dir": "nowhere"}, FileNotFoundError, "is not an existing folder"),
])
def test_rejects_bad_arguments(tmp_path, setup, kwargs, exc, message):
    out = tmp_path / "out"
    out.mkdir()
    (out / "m.v").write_text("module m(clk, rst, y);\n  input clk;\n  input rst;\n"
                             "  output y;\nendmodule\nmodule comb(a, y);\n  input a;\n"
                             "  output y;\nendmodule\n")
    (out / "notes.txt").write_text("x")
    if setup == "dup":
        (out / "dup.v").write_text("module m(clk);\n  input clk;\nendmodule\n")
    if setup == "outside":
        (tmp_path / "outside.v").write_text("module o(clk);\n  input clk;\nendmodule\n")
    args = {"out_dir": out, "config": preset("vck190"), "top": "m", "sources": ["m.v"]}
    if "out_dir" in kwargs:
        kwargs = {**kwargs, "out_dir": tmp_path / kwargs["out_dir"]}
    args.update(kwargs)
    out_dir = args.pop("out_dir")
    with pytest.raises(exc, match=re.escape(message)):
        write_vivado_flow(out_dir, **args)


def test_parameters_are_keyword_only(tmp_path):
    with pytest.raises(TypeError):
        write_vivado_flow(tmp_path, preset("vck190"), "m", ["m.v"])


@pytest.mark.slow
def test_full_vck190_emission_flow(tmp_path):
    """The real ``write_verilog`` output, board-scale arrays included (minutes)."""
    from specgen.gen.emit.verilog import write_verilog
    out = tmp_path / "vck190"
    modules = sorted(write_verilog(board="vck190", out=out))
    # Each emitted file is self-contained (its own copy of every module it uses: the
    # accelerator's and the linear engine's both define the DSPFP32 slices), so a flow
    # reads one top's file, as `specgen verilog`'s does; all of them together are refused.
    top = next(m for m in modules if m.startswith("Accelerator"))
    with pytest.raises(ValueError, match=r"is defined in both .*Vivado needs one definition"):
        write_vivado_flow(out, config=preset("vck190"), top=top,
                          sources=[f"{m}.v" for m in modules])
    sources = [f"{top}.v"]
    write_vivado_flow(out, config=preset("vck190"), top=top, sources=sources)
    calls = run_flow(out, top=top)
    assert args_of(calls, "read_verilog") == [[str(out.resolve() / s)] for s in sources]
    assert key_names(calls)[-1] == "close_project"


READ_HALF = {"araddr": ("output", "A"), "arlen": ("output", 8), "arid": ("output", "I"),
             "arvalid": ("output", 1), "arready": ("input", 1), "rdata": ("input", "D"),
             "rid": ("input", "I"), "rlast": ("input", 1), "rvalid": ("input", 1),
             "rready": ("output", 1)}
WRITE_HALF = {"awaddr": ("output", "A"), "awlen": ("output", 8), "awid": ("output", "I"),
              "awvalid": ("output", 1), "awready": ("input", 1), "wdata": ("output", "D"),
              "wstrb": ("output", "S"), "wlast": ("output", 1), "wvalid": ("output", 1),
              "wready": ("input", 1), "bid": ("input", "I"), "bvalid": ("input", 1),
              "bready": ("output", 1)}


def masters_top(name, masters):
    """A Verilog module ``name`` with the two clocks, a memory reset and, for each
    ``(prefix, half, data, addr, id)`` of ``masters``, an AXI4 master's read (``"r"``) or
    write (``"w"``) channels."""
    decl = [("clk", "input", 1), ("mem_clk", "input", 1), ("mem_rst", "input", 1)]
    for prefix, half, dw, aw, iw in masters:
        widths = {"A": aw, "D": dw, "I": iw, "S": dw // 8}
        for sig, (direction, width) in (READ_HALF if half == "r" else WRITE_HALF).items():
            decl.append((f"{prefix}__{sig}", direction, widths.get(width, width)))
    body = "\n".join(f"  {d} {'' if w == 1 else f'[{w - 1}:0] '}{n};" for n, d, w in decl)
    return f"module {name}({', '.join(n for n, _, _ in decl)});\n{body}\nendmodule\n"


def test_read_and_write_masters_share_memory_ports(tmp_path):
    from specgen.gen.emit.vivado import share_memory_ports
    masters = [("m_axi_norm_y", "r", 128, 32, 1), ("m_axi_norm_w", "r", 128, 32, 1),
               ("m_axi_copy_x", "r", 128, 32, 1), ("m_axi_copy_y", "w", 128, 32, 1),
               ("m_axi_norm_out", "w", 128, 32, 1),
               ("m_axi_wide_out", "w", 256, 32, 1),       # no read of its width
               ("m_axi_id_rd", "r", 64, 32, 2), ("m_axi_id_wr", "w", 64, 32, 1)]
    text = masters_top("mem_top", masters)
    ports = verilog_ports(text, "mem_top")
    buses = bus_interfaces(ports)
    assert len(buses) == len(masters)
    shared = {b.name: b for b in share_memory_ports(buses, ports)}
    # A write joins the read of its own engine where widths allow (longest common
    # prefix, ties to the first by name); the joined interfaces go in their reads' order.
    assert shared["m_axi_nmu00"].halves == ("m_axi_copy_x", "m_axi_copy_y")
    assert shared["m_axi_nmu01"].halves == ("m_axi_norm_w", "m_axi_norm_out")
    # No read of its data width, or an ID width of its own: the half stays alone.
    assert sorted(n for n in shared if not n.startswith("m_axi_nmu")) == [
        "m_axi_id_rd", "m_axi_id_wr", "m_axi_norm_y", "m_axi_wide_out"]
    joined = dict(shared["m_axi_nmu00"].port_maps)
    assert joined["ARADDR"] == "m_axi_copy_x__araddr" and joined["WDATA"] == "m_axi_copy_y__wdata"
    assert shared["m_axi_nmu00"].data_width == 128
    # Every physical port is in exactly one interface.
    mapped = [phys for b in shared.values() for _, phys in b.port_maps]
    assert sorted(mapped) == sorted(p.name for p in ports if p.name.startswith("m_axi_"))

    out = tmp_path / "out"
    out.mkdir()
    (out / "mem_top.v").write_text(text)
    write_vivado_flow(out, config=preset("vhk158"), top="mem_top", sources=["mem_top.v"])
    calls = run_flow(out, top="mem_top", stage="ip")
    props = [tuple(a) for a in args_of(calls, "set_property")]
    assert ("physical_name", "m_axi_norm_out__wvalid",
            "ipx::add_port_map:WVALID:m_axi_nmu01") in props
    assert ("physical_name", "m_axi_norm_w__arvalid",
            "ipx::add_port_map:ARVALID:m_axi_nmu01") in props
    readme = (out / "README.md").read_text()
    assert ("`m_axi_nmu01`: axi4 master, 128 bits: the read master `m_axi_norm_w` and the "
            "write master `m_axi_norm_out`") in readme
    assert "6 AXI4 memory interfaces" in readme


def test_more_memory_interfaces_than_hbm_nmu_ports_is_refused(tmp_path):
    from specgen.golden.config import HBM_NMU_PORTS
    out = tmp_path / "out"
    out.mkdir()
    reads = [(f"m_axi_r{i}", "r", 256, 32, 1) for i in range(HBM_NMU_PORTS + 1)]
    (out / "wide.v").write_text(masters_top("wide", reads))
    with pytest.raises(ValueError, match=r"top 'wide' has 65 AXI4 memory interfaces after "
                                         r"joining read and write masters, more than the 64 "
                                         r"HBM_NMU ports of board 'vhk158' \(HBM_NMU_PORTS\)"):
        write_vivado_flow(out, config=preset("vhk158"), top="wide", sources=["wide.v"])
    assert not (out / "package_ip.tcl").exists()
    # Joined with 65 writes, they fit; DDR boards have no such count here.
    (out / "wide.v").write_text(masters_top(
        "wide", reads + [(f"m_axi_w{i}", "w", 256, 32, 1) for i in range(HBM_NMU_PORTS)]))
    with pytest.raises(ValueError, match="65 AXI4 memory interfaces"):
        write_vivado_flow(out, config=preset("vhk158"), top="wide", sources=["wide.v"])
    (out / "wide.v").write_text(masters_top("wide", reads[:-1] + [
        (f"m_axi_w{i}", "w", 256, 32, 1) for i in range(HBM_NMU_PORTS)]))
    write_vivado_flow(out, config=preset("vhk158"), top="wide", sources=["wide.v"])
    write_vivado_flow(out, config=preset("vck190"), top="wide", sources=["wide.v"])


def test_the_2_7b_decoder_core_fits_the_hbm_nmu_ports():
    """The VHK158 2.7B core's 87 read or write masters take 61 AXI4 interfaces, each at
    most 256 bits wide (an HBM_NMU's widest, AMD PG313); without joining they were 87. (The
    conv1d's four lanes take two ports each for its windows, taps and new windows.)"""
    from amaranth.lib import wiring
    from specgen.gen.emit.verilog import decoder_design
    from specgen.gen.emit.vivado import Port, share_memory_ports
    from specgen.golden.config import HBM_NMU_PORTS, MEMORY_PORT_BITS
    from specgen.hw.hierarchy import silence
    _, top = decoder_design(preset("vhk158"), "2.7B")
    silence(top)            # its ports are read, it is never elaborated
    ports = [Port("__".join(map(str, path)), "input" if flow == wiring.In else "output",
                  len(value)) for path, flow, value in top.signature.flatten(top)]
    halves = [b for b in bus_interfaces(ports) if b.kind == "axi4"]
    shared = [b for b in share_memory_ports(bus_interfaces(ports), ports) if b.kind == "axi4"]
    assert (len(halves), len(shared)) == (87, 61)
    assert len(shared) <= HBM_NMU_PORTS
    assert max(b.data_width for b in shared) <= max(MEMORY_PORT_BITS["HBM"])
    assert sum(len(b.halves) for b in shared) + sum(not b.halves for b in shared) == 87
