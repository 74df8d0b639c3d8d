"""hw.dsp58.DSPFP32: the behavioural model against golden.dsp, through the Vivado-side bench.

The bench and vectors that `specgen verilog` ships for xsim (gen.emit.dsp_check) run here on
Icarus against the behavioural model of the same module: the model must pass them, and
the bench must catch a model that differs (a corrupted vector).
"""

import re
import shutil
import subprocess

import pytest

from specgen.golden.fp import FP16, FP32
from specgen.gen.emit.dsp_check import write_dsp_check
from specgen.hw.dsp58 import DSPFP32
from specgen.hw.hierarchy import convert

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None or shutil.which("vvp") is None,
                                reason="Icarus Verilog (iverilog, vvp) is not installed; "
                                       "apt-get install iverilog")


def _run(tmp_path, corrupt=False):
    unit = DSPFP32(a_fmt=FP16, b_fmt=FP32)
    text, _ = convert(unit, name=unit.module_name)
    (tmp_path / "dsp.v").write_text(text)
    check = write_dsp_check(tmp_path / "dsp_check", source="dsp.v", n=600)
    if corrupt:
        lines = (check / "vectors.hex").read_text().splitlines()
        last = lines[400]
        lines[400] = last[:-1] + ("0" if last[-1] != "0" else "1")
        (check / "vectors.hex").write_text("\n".join(lines) + "\n")
    subprocess.run(["iverilog", "-g2012", "-o", "tb", "../dsp.v", "tb_dspfp32.sv"], cwd=check,
                   check=True, capture_output=True, text=True)
    return subprocess.run(["vvp", "-n", "tb"], cwd=check, check=True, capture_output=True,
                          text=True).stdout


def test_behavioural_dspfp32_passes_the_shipped_vectors(tmp_path):
    out = _run(tmp_path)
    assert "PASS: 600 vectors" in out, out


def test_the_shipped_bench_catches_a_difference(tmp_path):
    out = _run(tmp_path, corrupt=True)
    assert "FAIL: 1 of 600 vectors differ" in out and "MISMATCH 400" in out, out


def test_dspfp32_rejects_other_formats():
    from specgen.golden.fp import BF16
    with pytest.raises(ValueError) as info:
        DSPFP32(a_fmt=BF16)
    assert str(info.value).startswith("DSPFP32.a_fmt must be FP16 or FP32")


# AMD's DSPFP32 ports and attributes (the Versal libraries guide's port table, UG1353 /
# UG1485 "DSPFP32", and the attribute list of AMD's UNISIM model), written out here from
# the documents so that a misspelled or mis-sized connection of the primitive fails.
_DSPFP32_STUB = """\
module DSPFP32 #(
  parameter A_FPTYPE = "B32", parameter A_INPUT = "DIRECT", parameter BCASCSEL = "B",
  parameter B_D_FPTYPE = "B32", parameter B_INPUT = "DIRECT", parameter PCOUTSEL = "FPA",
  parameter USE_MULT = "MULTIPLY", parameter RESET_MODE = "SYNC",
  parameter integer ACASCREG = 1, parameter integer AREG = 1, parameter integer FPA_PREG = 1,
  parameter integer FPBREG = 1, parameter integer FPCREG = 3, parameter integer FPDREG = 1,
  parameter integer FPMPIPEREG = 1, parameter integer FPM_PREG = 1,
  parameter integer FPOPMREG = 3, parameter integer INMODEREG = 1
) (
  output [7:0] ACOUT_EXP, output [22:0] ACOUT_MAN, output ACOUT_SIGN,
  output [7:0] BCOUT_EXP, output [22:0] BCOUT_MAN, output BCOUT_SIGN, output [31:0] PCOUT,
  output FPA_INVALID, output [31:0] FPA_OUT, output FPA_OVERFLOW, output FPA_UNDERFLOW,
  output FPM_INVALID, output [31:0] FPM_OUT, output FPM_OVERFLOW, output FPM_UNDERFLOW,
  input [7:0] ACIN_EXP, input [22:0] ACIN_MAN, input ACIN_SIGN,
  input [7:0] BCIN_EXP, input [22:0] BCIN_MAN, input BCIN_SIGN, input [31:0] PCIN,
  input CLK, input FPINMODE, input [6:0] FPOPMODE,
  input [7:0] A_EXP, input [22:0] A_MAN, input A_SIGN,
  input [7:0] B_EXP, input [22:0] B_MAN, input B_SIGN, input [31:0] C,
  input [7:0] D_EXP, input [22:0] D_MAN, input D_SIGN,
  input ASYNC_RST, input CEA1, input CEA2, input CEB, input CEC, input CED, input CEFPA,
  input CEFPINMODE, input CEFPM, input CEFPMPIPE, input CEFPOPMODE,
  input RSTA, input RSTB, input RSTC, input RSTD, input RSTFPA, input RSTFPINMODE,
  input RSTFPM, input RSTFPMPIPE, input RSTFPOPMODE
);
endmodule
"""


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
def test_primitive_variant_connects_every_port_of_the_amd_primitive(tmp_path):
    """The Vivado variant of a small DSPLinearUnit elaborates against the primitive's port
    list: every connection names a real port with the right width, and no port is left off."""
    from specgen.hw.dsp_linear_unit import DSPLinearUnit
    unit = DSPLinearUnit(rows=2, cols=2, max_tokens=3, max_k=4)
    _, library = convert(unit, name=unit.module_name)
    (tmp_path / "vivado.v").write_text(library.verilog(top=unit.module_name, variant="vivado"))
    (tmp_path / "DSPFP32.v").write_text(_DSPFP32_STUB)
    proc = subprocess.run(["iverilog", "-g2012", "-Wall", "-o", "a.out", "-s", unit.module_name,
                           "vivado.v", "DSPFP32.v"], cwd=tmp_path, capture_output=True, text=True)
    # A misnamed port is an error; a port of the wrong width only a warning: neither passes.
    assert proc.returncode == 0 and "warning" not in proc.stderr.lower(), proc.stderr
    # Every port is connected explicitly (AMD's model lets a floating input read as 1).
    text = library.verilog(top=unit.module_name, variant="vivado")
    inst = text[text.index("DSPFP32 #("):]
    inst = inst[:inst.index(");")]
    ports = set(re.findall(r"\b(?:input|output)\s+(?:\[\d+:0\]\s+)?(\w+)", _DSPFP32_STUB))
    connected = set(re.findall(r"\.(\w+)\(", inst))
    params = set(re.findall(r"parameter (?:integer )?(\w+)", _DSPFP32_STUB))
    assert ports <= connected, sorted(ports - connected)
    assert connected - ports <= params, sorted(connected - ports - params)
