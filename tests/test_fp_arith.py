import pytest

from specgen.golden.fp import BF16, FP16, FP32, FPFormat
from specgen.hw.fp_arith import FPAdd, FPMul, FPNarrow
from specgen.sim.lint import lint_component
from specgen.sim.runner import run_bench

UNITS = {"mul": FPMul, "add": FPAdd}


@pytest.mark.sim
@pytest.mark.parametrize("op,fmt,stages,count", [
    pytest.param("mul", FP32, 0, 3000, id="mul-fp32-s0"),
    pytest.param("mul", FP32, 5, 3000, id="mul-fp32-s5"),
    pytest.param("add", FP32, 0, 3000, id="add-fp32-s0"),
    pytest.param("add", FP32, 6, 3000, id="add-fp32-s6"),
    pytest.param("mul", FP16, 4, 2000, id="mul-fp16-s4"),
    pytest.param("add", BF16, 2, 2000, id="add-bf16-s2"),
])
def test_fp_arith(op, fmt, stages, count):
    dut = UNITS[op](fmt=fmt, stages=stages)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_arith", testcase="arith",
              params={"op": op, "fmt": [fmt.exp_bits, fmt.man_bits], "latency": dut.latency,
                      "count": count})


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("op", ["mul", "add"])
def test_fp_arith_long(op):
    dut = UNITS[op](fmt=FP32, stages=2)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_arith", testcase="arith",
              params={"op": op, "fmt": [8, 23], "latency": dut.latency, "count": 200_000})


@pytest.mark.sim
@pytest.mark.parametrize("dst,stages,count", [
    pytest.param(FP16, 0, 4000, id="fp16-s0"),
    pytest.param(FP16, 3, 4000, id="fp16-s3"),
    pytest.param(BF16, 2, 2000, id="bf16-s2"),
])
def test_fp_narrow(dst, stages, count):
    dut = FPNarrow(fmt=FP32, dst=dst, stages=stages)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_arith", testcase="narrow",
              params={"fmt": [8, 23], "dst": [dst.exp_bits, dst.man_bits], "latency": dut.latency,
                      "count": count})


def test_fp_narrow_lint(tmp_path):
    ok, out = lint_component(FPNarrow(fmt=FP32, dst=FP16, stages=2), folder=tmp_path)
    assert ok, out


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_fp_narrow_parameters():
    n = FPNarrow(fmt=FP32, dst=FP16, stages=2)
    assert (n.latency, n.module_name, len(n.a), len(n.result)) == (
        2, "FPNarrow_e8_m23_to_e5_m10_s2", 32, 16)
    with pytest.raises(ValueError, match=r"FPNarrow.dst must have at most fmt's 5 exponent and 10 "
                                         r"fraction bits, not 8 and 23"):
        FPNarrow(fmt=FP16, dst=FP32, stages=1)
    with pytest.raises(TypeError, match=r"FPNarrow.dst must be an FPFormat, not 'fp16'"):
        FPNarrow(fmt=FP32, dst="fp16", stages=1)
    with pytest.raises(ValueError, match=r"FPNarrow.stages must be an integer in \[0, 3\], not 4"):
        FPNarrow(fmt=FP32, dst=FP16, stages=4)


@pytest.mark.parametrize("op", ["mul", "add"])
def test_fp_arith_lint(op, tmp_path):
    dut = UNITS[op](fmt=FP32, stages=2)
    ok, out = lint_component(dut, folder=tmp_path)
    assert ok, out


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("cls,kwargs,exc,message", [
    (FPMul, {"fmt": FP32, "stages": 6}, ValueError, "FPMul.stages must be an integer in [0, 5], not 6"),
    (FPAdd, {"fmt": FP32, "stages": -1}, ValueError, "FPAdd.stages must be an integer in [0, 6], not -1"),
    (FPAdd, {"fmt": (8, 23), "stages": 1}, TypeError, "FPAdd.fmt must be an FPFormat, not (8, 23)"),
    (FPMul, {"fmt": FP32, "stages": 1.0}, TypeError, "FPMul.stages must be an integer in [0, 5], not 1.0"),
])
def test_fp_arith_rejects_bad_parameters(cls, kwargs, exc, message):
    with pytest.raises(exc) as info:
        cls(**kwargs)
    assert str(info.value) == message


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_fp_arith_properties():
    mul = FPMul(fmt=FPFormat(exp_bits=5, man_bits=10), stages=3)
    assert (mul.latency, mul.module_name) == (3, "FPMul_e5_m10_s3")
    add = FPAdd(fmt=FP32, stages=0)
    assert (add.latency, add.module_name, len(add.result)) == (0, "FPAdd_e8_m23_s0", 32)
    with pytest.raises(TypeError):
        FPMul(FP32, 1)
