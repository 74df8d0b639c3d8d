import json

import pytest

from specgen.gen.cli.commands import main
from specgen.gen.cli.output import sha256_file
from specgen.golden.config import preset, preset_names
from specgen.sim.lint import lint, lint_modules, split_modules
from specgen.sim.runner import VERILATOR_WAIVERS


# The board designs take about 2 minutes each (emission and lint, measured 2026-12-01):
# make test-slow runs them; the sim design has the same modules at its own scale.
@pytest.mark.parametrize("board", [pytest.param(n, marks=pytest.mark.slow) if n != "sim"
                                   else n for n in preset_names()])
def test_emitted_verilog_passes_lint(board, tmp_path):
    """Every module of every emitted file of every preset, each linted once
    (``lint_modules``); the manifest ``specgen verilog`` writes beside them lists every
    file with its digest (checked here so that the design is emitted once)."""
    out = tmp_path / board
    assert main(["verilog", "--board", board, "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["board"] == board
    assert manifest["config"]["tree"]["fifo_depth"] == preset(board).tree.fifo_depth
    top = next(m for m in manifest["modules"] if m.startswith("Accelerator"))
    regmap = {f"regmap/specgen{s}" for s in (".rdl", "_regmap.h", "_regmap.md", "_regmap.xml")}
    assert set(manifest["files"]) == ({f"{m}.v" for m in manifest["modules"]}
                                      | {"specgen_regs.h", f"{top}.core"} | regmap)
    for name, digest in manifest["files"].items():
        assert sha256_file(out / name) == digest
    files = sorted(out.glob("*.v"))
    assert files
    for path in files:
        modules = split_modules(path.read_text())
        assert path.stem in modules, f"{path.name} does not define its top module"
        ok, output = lint_modules(path)
        assert ok, output


def test_lint_modules_checks_instances_against_stubs(tmp_path):
    """Stubbing a shared module keeps its port list: a wrong port name or an
    undriven output inside the module under test still fails."""
    child = ("module child(a, y);\n  input a;\n  output y;\n  assign y = ~a;\nendmodule\n")
    good = tmp_path / "good.v"
    good.write_text(child + "module top(a, y);\n  input a;\n  output y;\n"
                    "  child u (.a(a), .y(y));\nendmodule\n")
    ok, output = lint_modules(good)
    assert ok, output
    bad = tmp_path / "bad.v"
    bad.write_text(child + "module top(a, y);\n  input a;\n  output y;\n"
                   "  child u (.b(a), .y(y));\nendmodule\n")
    ok, output = lint_modules(bad)
    assert not ok and "PINNOTFOUND" in output and "--- top ---" in output
    undriven = tmp_path / "undriven.v"
    undriven.write_text("module leaf(a, y);\n  input a;\n  output y;\nendmodule\n"
                        "module top(a, y);\n  input a;\n  output y;\n"
                        "  leaf u (.a(a), .y(y));\nendmodule\n")
    ok, output = lint_modules(undriven)
    assert not ok and "--- leaf ---" in output and "UNDRIVEN" in output


def test_lint_is_not_blanket(tmp_path):
    """A real problem outside the waivers still fails the lint."""
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output y);\n  assign y = b;\nendmodule\n")
    ok, output = lint(bad, top="bad")
    assert not ok and "b" in output
    multi = tmp_path / "multi.v"
    multi.write_text("module multi(input clk, input a, output reg y);\n"
                     "  always @(posedge clk) y = a;\nendmodule\n")
    ok, output = lint(multi, top="multi")
    assert not ok and "BLKSEQ" in output


def test_waivers_are_documented():
    for name, reason in VERILATOR_WAIVERS.items():
        assert name.isupper() and len(reason) > 10


def test_zero_memories_get_a_loop_not_a_word_list(tmp_path):
    """A memory initialized to zero is emitted with one ``initial`` loop (not one line
    per word), a memory with contents keeps them, and both read back their initial
    words under Icarus, which leaves an uninitialized memory at X; the loop, and
    only it, is stripped for synthesis."""
    from amaranth import Module
    from amaranth.lib import wiring
    from amaranth.lib.memory import Memory
    from amaranth.lib.wiring import In, Out

    from specgen.hw.hierarchy import convert, strip_zero_init_loops
    from specgen.sim.runner import simulator_available

    class TwoMemories(wiring.Component):
        addr: In(10)
        zero: Out(8)
        lut_out: Out(8)

        def elaborate(self, platform):
            m = Module()
            m.submodules.zeros = zeros = Memory(shape=8, depth=1000, init=[])
            m.submodules.lut = table = Memory(shape=8, depth=4, init=[3, 1, 4, 1])
            for mem, out in ((zeros, self.zero), (table, self.lut_out)):
                rp = mem.read_port(domain="comb")
                m.d.comb += [rp.addr.eq(self.addr), out.eq(rp.data)]
            return m

    text, _ = convert(TwoMemories(), name="two_memories")
    assert "zeros[" in text and "<= 999;" in text and "zeros[_zero_init_0] = 8'd0" in text
    assert "zeros[999] =" not in text and "zeros[0] =" not in text
    assert "lut[2] = 8'h04" in text or "lut[2] = 8'd4" in text
    # Synthesis input (gen.estimate.report) drops the loop, which Yosys would unroll, and
    # keeps real contents.
    stripped = strip_zero_init_loops(text)
    assert "_zero_init_" not in stripped and "reg [7:0] zeros [999:0];" in stripped
    assert "lut[2] = 8'h04" in stripped or "lut[2] = 8'd4" in stripped
    path = tmp_path / "two_memories.v"
    path.write_text(text)
    ok, output = lint_modules(path)
    assert ok, output
    ok, reason = simulator_available("icarus")
    if not ok:
        pytest.skip(reason)
    import subprocess
    bench = tmp_path / "tb.v"
    bench.write_text("module tb; reg [9:0] a; wire [7:0] z, t; integer i;\n"
                     "  two_memories dut(.addr(a), .zero(z), .lut_out(t));\n"
                     "  initial begin for (i = 0; i < 1000; i = i + 1) begin a = i; #1;\n"
                     "    if (z !== 8'd0) $display(\"BAD zero %0d %b\", i, z);\n"
                     "    if (i < 4 && t !== (i == 0 ? 3 : i == 2 ? 4 : 1)) $display(\"BAD table %0d\", i);\n"
                     "  end $display(\"DONE\"); end\nendmodule\n")
    subprocess.run(["iverilog", "-o", str(tmp_path / "tb.vvp"), str(bench), str(path)], check=True)
    out = subprocess.run(["vvp", str(tmp_path / "tb.vvp")], capture_output=True, text=True,
                         check=True).stdout
    assert "DONE" in out and "BAD" not in out, out
