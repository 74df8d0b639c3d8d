"""``specgen verilog --top decoder``: the decoder core behind its registers, emitted.

The refusals run in ``make test``; the emissions convert a whole core (tens of seconds to
minutes) and are ``slow``.
"""

import json
import re

import pytest

from specgen.gen.cli.commands import main
from specgen.gen.cli.output import sha256_file


def _one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("board, model, fragments", [
    # 2.7B's in_proj against the sim array's max_k: the core's check, naming the limit.
    ("sim", "2.7B", ("mixer.in_proj.weight", "linear.max_k (16)")),
    # micro's 2 heads against VCK190's 8-word SSM input: the unit's own check.
    ("vck190", "micro", ("SSMConfig.input_words must be a power of two that divides",)),
])
def test_a_model_the_design_cannot_run_is_refused_in_one_line(tmp_path, capsys, board, model,
                                                              fragments):
    out = tmp_path / "out"
    assert main(["verilog", "--board", board, "--top", "decoder", "--model", model,
                 "--out", str(out)]) == 2
    err = _one_line_error(capsys)
    assert f"--model {model} does not fit the design '{board}'" in err
    assert all(f in err for f in fragments), err
    assert not out.exists()


@pytest.mark.parametrize("argv, fragment", [
    (["--top", "fpga"], "unknown --top 'fpga'; allowed: accelerator, decoder"),
    (["--top", "decoder", "--model", "9B"], "--model: lm_preset.name must be one of"),
    (["--top", "decoder", "--only", "ring_fifo"], "--only is for --top accelerator"),
])
def test_bad_top_arguments_are_one_line(tmp_path, capsys, argv, fragment):
    out = tmp_path / "out"
    assert main(["verilog", "--board", "sim", "--out", str(out), *argv]) == 2
    assert fragment in _one_line_error(capsys)
    assert not out.exists()


def _defines(text):
    return {m.group(1): int(m.group(2), 0) for m in
            re.finditer(r"#define SPECGEN_CORE_(\w+) (0x[0-9a-f]+|\d+)u\b", text)}


@pytest.mark.slow
def test_the_sim_decoder_top_with_its_header(tmp_path):
    out = tmp_path / "core"
    assert main(["verilog", "--board", "sim", "--top", "decoder", "--model", "micro",
                 "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["top"] == "decoder" and manifest["model"] == "micro"
    (top,) = manifest["modules"]
    assert top.startswith("DecoderTop_")
    for name, digest in manifest["files"].items():
        assert sha256_file(out / name) == digest
    assert {f"{top}.v", f"{top}.core", "specgen_core_regs.h",
            "regmap/specgen_core.rdl"} <= set(manifest["files"])
    h = _defines((out / "specgen_core_regs.h").read_text())
    assert h["ID_RESET"] == int.from_bytes(b"SPCD", "big") and h["CTRL_OFFSET"] == 0x20
    verilog = (out / f"{top}.v").read_text()
    header = verilog[verilog.index(f"module {top}("):]
    header = header[:header.index(");")]
    for port in ("s_axi__awaddr", "irq", "m_axi_seq__araddr", "m_axi_accept_path__awaddr"):
        assert port in header, port


@pytest.mark.slow
def test_the_vhk158_decoder_top_for_vivado(tmp_path):
    """The paper-scale core (Mamba2-2.7B on VHK158) with its Vivado flow: the registers'
    AXI4-Lite port, the interrupt and every AXI4 master packaged as interfaces."""
    out = tmp_path / "core"
    assert main(["verilog", "--board", "vhk158", "--top", "decoder", "--model", "2.7B",
                 "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    (top,) = manifest["modules"]
    package = (out / "package_ip.tcl").read_text()
    assert "s_axi" in package and "irq" in package and "m_axi_linear_w" in package
    # 87 read or write masters, joined in pairs onto 61 AXI4 interfaces: at most the
    # part's 64 HBM_NMU ports.
    memory = [line for line in package.splitlines()
              if line.startswith("set busif [ipx::add_bus_interface m_axi_")]
    assert len(memory) == 61
    assert sum("m_axi_nmu" in line for line in memory) == 26
    assert "SPECGEN_CORE" in (out / "specgen_core_regs.h").read_text()
