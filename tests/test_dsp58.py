"""hw.dsp58.DSPFP32: the behavioural model against golden.dsp, through the Vivado-side bench.

The bench and vectors that `specgen verilog` ships for xsim (gen.dsp_check) run here on
Icarus against the behavioural model of the same module: the model must pass them, and
the bench must catch a model that differs (a corrupted vector).
"""

import shutil
import subprocess

import pytest

from golden.fp import FP16, FP32
from gen.dsp_check import write_dsp_check
from hw.dsp58 import DSPFP32
from hw.hierarchy import convert

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
    from golden.fp import BF16
    with pytest.raises(ValueError) as info:
        DSPFP32(a_fmt=BF16)
    assert str(info.value).startswith("DSPFP32.a_fmt must be FP16 or FP32")
