import pytest

from specgen.golden.mamba2 import MAMBA2_VOCAB
from specgen.hw.argmax import Argmax
from specgen.sim.lint import lint_component
from specgen.sim.runner import BenchFailure, run_bench


def _run(dut, *, testcase=None, **extra):
    params = {"size": dut.size, "latency": dut.latency, "vector_cycles": dut.vector_cycles,
              **extra}
    return run_bench(dut, name=dut.module_name, module="specgen.sim.argmax", testcase=testcase,
                     params=params)


@pytest.mark.sim
@pytest.mark.parametrize("size", [37, 2])
def test_argmax(size):
    """Every scenario, on an odd vocabulary and the smallest."""
    _run(Argmax(size=size))


@pytest.mark.sim
def test_argmax_bench_can_fail():
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        _run(Argmax(size=37), testcase="full_rate", corrupt=True)


def test_argmax_lint(tmp_path):
    dut = Argmax(size=MAMBA2_VOCAB)
    ok, out = lint_component(dut, folder=tmp_path)
    assert ok, out


def test_argmax_properties_and_errors():
    dut = Argmax()
    assert dut.size == MAMBA2_VOCAB and dut.module_name == "Argmax_n50288"
    assert dut.latency == 2 and dut.vector_cycles == MAMBA2_VOCAB + 1
    assert len(dut.o.payload.index) == 16
    with pytest.raises(ValueError, match=r"^Argmax.size must be an integer >= 2, not 1$"):
        Argmax(size=1)
    with pytest.raises(TypeError, match=r"^Argmax.size must be an integer >= 2, not 4.0$"):
        Argmax(size=4.0)
