import dataclasses

import pytest

from specgen.golden.config import preset
from specgen.golden.nonlinear import LUTSpec
from specgen.hw.conv1d import Conv1d
from specgen.sim.lint import lint_component
from specgen.sim.runner import BenchFailure, run_bench

#: A short SiLU table (step 1/8 over [−25, 20], as the sim preset's) keeps the build fast.
SIM = preset("sim")


def _run(dut, *, name=None, testcase=None, **extra):
    params = {"silu_lut": dataclasses.asdict(SIM.ssm.silu_lut), "d_conv": dut.d_conv,
              "contract": dut._ops.contract, "latency": dut.latency,
              "capacity": dut.fifo_depth, **extra}
    return run_bench(dut, name=name or dut.module_name, module="specgen.sim.conv1d", testcase=testcase,
                     params=params)


# The default suite builds the board contract's conv1d; the sim preset's build runs with the slow set.
@pytest.mark.sim
@pytest.mark.slow
def test_conv1d_sim_preset():
    """The sim preset's block ("ieee", FP units of 2 stages) under every scenario."""
    _run(Conv1d.from_config(SIM))


@pytest.mark.sim
def test_conv1d_dspfp32():
    """DSPFP32 slices (flush to zero; the DSP cascade's one-cycle steps), d_conv = 3."""
    _run(Conv1d(silu_lut=SIM.ssm.silu_lut, d_conv=3, contract="dspfp32"))


@pytest.mark.sim
def test_conv1d_bench_can_fail():
    """One wrong expected beat makes the bench fail (the comparison is live)."""
    dut = Conv1d.from_config(SIM)
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        _run(dut, testcase="full_rate", corrupt=True)


@pytest.mark.sim
def test_conv1d_dspfp32_bench_tells_the_contracts_apart():
    """The DSPFP32 block checked against the "ieee" golden fails: the stream's
    subnormals reach the flushes."""
    dut = Conv1d(silu_lut=SIM.ssm.silu_lut, d_conv=3, contract="dspfp32")
    params = {"silu_lut": dataclasses.asdict(SIM.ssm.silu_lut), "d_conv": 3, "contract": "ieee",
              "latency": dut.latency, "capacity": dut.fifo_depth}
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        run_bench(dut, name=dut.module_name, module="specgen.sim.conv1d", testcase="full_rate",
                  params=params)


def test_conv1d_lint(tmp_path):
    dut = Conv1d(silu_lut=LUTSpec(function="silu", lo=-2.0, hi=2.0, step_log2=3),
                 mul_stages=1, add_stages=1)
    ok, out = lint_component(dut, folder=tmp_path)
    assert ok, out


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_conv1d_properties_and_errors():
    silu = SIM.ssm.silu_lut
    dut = Conv1d(silu_lut=silu, mul_stages=2, add_stages=3)
    # mul 2, three multiply-adds advancing one add (3) each, bias add 3, SiLU 5+2+3·5, FIFO 1.
    assert dut.pipeline_latency == 2 + 3 * 3 + 3 + (5 + 2 + 3 * 5)
    assert dut.latency == dut.pipeline_latency + 1
    assert dut.fifo_depth == dut.pipeline_latency + 2
    dsp = Conv1d(silu_lut=silu, contract="dspfp32")
    # DSPFP32: product 3 cycles, each cascade step 1 cycle, add 4, SiLU 5+2+3·4.
    assert dsp.pipeline_latency == 3 + 3 * 1 + 4 + (5 + 2 + 3 * 4)
    assert dsp.module_name == "Conv1d_d4_silu_s3_d3_dsp"
    board = Conv1d.from_config(preset("vck190"))
    assert board.module_name == "Conv1d_d4_silu_s7_d3_dsp" and board.d_conv == 4
    with pytest.raises(ValueError, match=r"^Conv1d.d_conv must be an integer in \[2, 8\], not 9$"):
        Conv1d(silu_lut=silu, d_conv=9)
    with pytest.raises(TypeError, match=r"^Conv1d.silu_lut must be a LUTSpec of 'silu', not 'silu'$"):
        Conv1d(silu_lut="silu")
    with pytest.raises(ValueError, match=r"^Conv1d.contract must be one of 'ieee', 'dspfp32', "
                                         r"not 'fast'$"):
        Conv1d(silu_lut=silu, contract="fast")
