"""The emitted folder's FuseSoC core, parsed by FuseSoC itself."""

import json
import sys

import pytest

from specgen.gen.cli.commands import main
from specgen.gen.cli.output import specgen_version
from specgen.golden.config import preset
from specgen.sim.runner import VERILATOR_WAIVERS

fusesoc = pytest.importorskip("fusesoc", reason="fusesoc not installed (dev extra)")

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")


@pytest.fixture
def small_design(monkeypatch):
    import specgen.gen.emit.verilog
    from specgen.hw.ring_fifo import RingFIFO
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: {"fifo": RingFIFO(width=4, depth=3)})


def parse(path):
    from fusesoc.capi2.coreparser import Core2Parser
    from fusesoc.core import Core
    return Core(parser=Core2Parser(), core_file=str(path))


def flags(target, tool):
    return {"target": target, "is_toplevel": True, "tool": tool}


def test_board_design_core_has_lint_and_synth(tmp_path, small_design):
    out = tmp_path / "v"
    assert main(["verilog", "--board", "vck190", "--out", str(out), "-q"]) == 0
    assert "fifo.core" in json.loads((out / "manifest.json").read_text())["files"]
    core = parse(out / "fifo.core")
    assert str(core.name) == f"specgen:specgen:fifo:{specgen_version()}"
    synth = flags("synth", "vivado")
    assert core.get_toplevel(synth) == "fifo"
    files = core.get_files(synth)
    assert files == [{"name": "fifo.v", "file_type": "verilogSource"},
                     {"name": "constraints.xdc", "file_type": "xdc"}]
    assert all((out / f["name"]).is_file() for f in files)
    assert core.get_tool_options(synth) == {"part": preset("vck190").board.part}
    lint = core.get_tool_options(flags("lint", "verilator"))
    assert lint["mode"] == "lint-only"
    assert lint["verilator_options"] == ["-Wall"] + [f"-Wno-{w}" for w in VERILATOR_WAIVERS]
    assert "fifo.core" in (out / "README.md").read_text()


def test_sim_design_core_has_no_synth_target(tmp_path, small_design):
    out = tmp_path / "s"
    assert main(["verilog", "--board", "sim", "--out", str(out), "-q"]) == 0
    core = parse(out / "fifo.core")
    assert core.get_files(flags("default", "verilator")) == [
        {"name": "fifo.v", "file_type": "verilogSource"}]
    assert core.get_target(flags("synth", "vivado")) is None


def test_fusesoc_command_lists_the_core(tmp_path, small_design, monkeypatch, capsys):
    out = tmp_path / "v"
    assert main(["verilog", "--board", "vck190", "--out", str(out), "-q"]) == 0
    from fusesoc.main import main as fusesoc_main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["fusesoc", "--cores-root", str(out), "core-info",
                                      f"specgen:specgen:fifo:{specgen_version()}"])
    fusesoc_main()
    info = capsys.readouterr().out
    assert f"specgen:specgen:fifo:{specgen_version()}" in info
    for target in ("default", "lint", "synth"):
        assert f"{target} " in info


@pytest.fixture
def primitive_design(monkeypatch):
    import specgen.gen.emit.verilog
    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    # The smallest block that instantiates DSPFP32 (tests/test_dsp58.py builds the same).
    monkeypatch.setattr(specgen.gen.emit.verilog, "blocks", lambda config: {
        "dsp": DSPLinearUnit(rows=1, cols=1, max_tokens=1, max_k=2)})


def test_synth_reads_the_primitive_variant_and_simulation_the_behavioural_one(
        tmp_path, primitive_design):
    out = tmp_path / "v"
    assert main(["verilog", "--board", "vck190", "--out", str(out), "-q"]) == 0
    core = parse(out / "dsp.core")
    synth = core.get_files(flags("synth", "vivado"))
    assert synth == [{"name": "primitives/dsp.v", "file_type": "verilogSource"},
                     {"name": "constraints.xdc", "file_type": "xdc"}]
    for target, tool in (("default", "verilator"), ("lint", "verilator")):
        assert core.get_files(flags(target, tool)) == [
            {"name": "dsp.v", "file_type": "verilogSource"}], target
    # The two files are what their names say: AMD's primitive, and its behavioural model.
    primitive = (out / "primitives" / "dsp.v").read_text()
    behavioural = (out / "dsp.v").read_text()
    assert "DSPFP32 #(" in primitive and "DSPFP32 #(" not in behavioural
    # The Vivado flow reads the same file as FuseSoC's synth target.
    from specgen.gen.emit.vivado import SETTINGS_TCL
    assert "primitives/dsp.v" in (out / SETTINGS_TCL).read_text()
