import pytest

from specgen.golden.config import preset
from specgen.hw.residual import Residual
from specgen.sim.lint import lint_component
from specgen.sim.runner import BenchFailure, run_bench


def _run(dut, *, testcase=None, contract=None, **extra):
    params = {"contract": contract or dut._ops.contract, "latency": dut.latency,
              "capacity": dut.fifo_depth, **extra}
    return run_bench(dut, name=dut.module_name, module="specgen.sim.residual", testcase=testcase,
                     params=params)


@pytest.mark.sim
@pytest.mark.parametrize("board", ["sim", "vck190"])
def test_residual(board):
    """The sim preset's fabric FPAdd and the board's DSPFP32 adder, every scenario."""
    _run(Residual.from_config(preset(board)))


@pytest.mark.sim
def test_residual_bench_can_fail():
    """A wrong expected sum fails, and so does the DSP adder checked against the
    "ieee" golden (the stream's subnormal sums reach the flush)."""
    dut = Residual(contract="dspfp32")
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        _run(dut, testcase="full_rate", corrupt=True)
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        _run(dut, testcase="random_flow", contract="ieee")


def test_residual_lint(tmp_path):
    dut = Residual(add_stages=1)
    ok, out = lint_component(dut, folder=tmp_path)
    assert ok, out


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_residual_properties_and_errors():
    assert Residual(add_stages=3).latency == 4 and Residual(add_stages=3).fifo_depth == 5
    assert Residual(contract="dspfp32").latency == 5
    assert Residual.from_config(preset("vck190")).module_name == "Residual_dsp"
    with pytest.raises(ValueError, match=r"^Residual.add_stages must be an integer in \[0, 6\], "
                                         r"not 9$"):
        Residual(add_stages=9)
    with pytest.raises(ValueError, match=r"^Residual.contract must be one of 'ieee', 'dspfp32', "
                                         r"not 'exact'$"):
        Residual(contract="exact")
