import dataclasses

import pytest

from specgen.golden.nonlinear import DEFAULT_LUTS, LUTSpec
from specgen.hw.ssm_nonlinear import LUTFunction
from specgen.sim.lint import lint
from specgen.sim.runner import emit_verilog, run_bench


def _spec_params(spec):
    return dataclasses.asdict(spec)


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("function,mul_stages,add_stages,count", [
    pytest.param("exp", 2, 2, 2000, id="exp-m2a2"),
    pytest.param("softplus", 1, 1, 2000, id="softplus-m1a1"),
    pytest.param("silu", 0, 1, 2000, id="silu-m0a1"),
])
def test_lut_function(function, mul_stages, add_stages, count):
    dut = LUTFunction(spec=DEFAULT_LUTS[function], mul_stages=mul_stages, add_stages=add_stages)
    run_bench(dut, name=dut.module_name, module="specgen.sim.ssm_nonlinear", testcase="lut",
              params={"spec": _spec_params(dut.spec), "latency": dut.latency, "count": count})


@pytest.mark.sim
@pytest.mark.slow
def test_lut_function_small_table():
    """A non-default geometry: degree 2, step 2^-3, positive lo."""
    spec = LUTSpec(function="exp", lo=0.5, hi=3.0, step_log2=3, degree=2)
    dut = LUTFunction(spec=spec, mul_stages=1, add_stages=2)
    run_bench(dut, name=dut.module_name + "_lo0p5", module="specgen.sim.ssm_nonlinear", testcase="lut",
              params={"spec": _spec_params(spec), "latency": dut.latency, "count": 1500})


@pytest.mark.sim
def test_lut_function_dspfp32_small_table():
    """The Horner steps on DSPFP32 slices (flush to zero), against lut_eval with the
    same contract; the inputs include subnormals and the smallest normals."""
    spec = LUTSpec(function="softplus", lo=-4.0, hi=3.0, step_log2=3, degree=3)
    dut = LUTFunction(spec=spec, contract="dspfp32")
    run_bench(dut, name=dut.module_name + "_lo_m4", module="specgen.sim.ssm_nonlinear", testcase="lut",
              params={"spec": _spec_params(spec), "latency": dut.latency, "count": 1500,
                      "contract": "dspfp32"})


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("function", ["exp", "softplus", "silu"])
def test_lut_function_long(function):
    dut = LUTFunction(spec=DEFAULT_LUTS[function])
    run_bench(dut, name=dut.module_name, module="specgen.sim.ssm_nonlinear", testcase="lut",
              params={"spec": _spec_params(dut.spec), "latency": dut.latency, "count": 100_000})


def test_lut_function_lint(tmp_path):
    dut = LUTFunction(spec=LUTSpec(function="silu", lo=-2.0, hi=2.0), mul_stages=1, add_stages=1)
    path = tmp_path / f"{dut.module_name}.v"
    # Flattened: Amaranth writes submodules as extra modules of the same file,
    # which -Wall reports as DECLFILENAME (not a listed waiver).
    path.write_text(emit_verilog(dut, name=dut.module_name))
    ok, out = lint(path, top=dut.module_name)
    assert ok, out


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_lut_function_properties_and_errors():
    dut = LUTFunction(spec=DEFAULT_LUTS["exp"], mul_stages=2, add_stages=3)
    assert dut.latency == 5 + 2 + 3 * 5
    assert dut.module_name == "LUTFunction_exp_s7_d3_m2a3"
    dsp = LUTFunction(spec=DEFAULT_LUTS["exp"], contract="dspfp32")
    assert dsp.latency == 5 + 2 + 3 * 4                 # one DSPFP32 multiply-add a step
    assert dsp.module_name == "LUTFunction_exp_s7_d3_dsp"
    with pytest.raises(ValueError, match=r"^LUTFunction.contract must be one of 'ieee', "
                                         r"'dspfp32', not 'fast'$"):
        LUTFunction(spec=DEFAULT_LUTS["exp"], contract="fast")
    with pytest.raises(TypeError, match=r"^LUTFunction.spec must be a LUTSpec, not 'exp'$"):
        LUTFunction(spec="exp")
    with pytest.raises(ValueError, match=r"^LUTFunction.add_stages must be an integer in \[0, 6\], not 7$"):
        LUTFunction(spec=DEFAULT_LUTS["exp"], add_stages=7)
