import pytest

from specgen.golden.mamba2 import MAMBA2_VOCAB
from specgen.hw.argmax import Argmax
from specgen.sim.lint import lint_component
from specgen.sim.runner import BenchFailure, run_bench


def _run(dut, *, testcase=None, **extra):
    params = {"size": dut.size, "lanes": dut.lanes, "latency": dut.latency,
              "vector_cycles": dut.vector_cycles, **extra}
    return run_bench(dut, name=dut.module_name, module="specgen.sim.argmax", testcase=testcase,
                     params=params)


@pytest.mark.sim
@pytest.mark.parametrize("size, lanes", [(37, 1), (2, 1), (48, 4), (96, 16)])
def test_argmax(size, lanes):
    """Every scenario, on an odd vocabulary and the smallest, and with 4 and 16 logits a
    beat (ties inside a beat and across beats, NaN lanes; 16 lanes: a vector of as many
    beats as the pipeline is deep)."""
    _run(Argmax(size=size, lanes=lanes))


@pytest.mark.sim
def test_argmax_bench_can_fail():
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        _run(Argmax(size=37), testcase="full_rate", corrupt=True)


@pytest.mark.parametrize("lanes", [1, 4])
def test_argmax_lint(tmp_path, lanes):
    dut = Argmax(size=MAMBA2_VOCAB, lanes=lanes)
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
    four = Argmax(size=48, lanes=4)
    assert (four.latency, four.vector_cycles, four.module_name) == (4, 13, "Argmax_n48_l4")
    assert len(four.i.payload) == 128
    with pytest.raises(ValueError, match=r"^Argmax.lanes must be one of 1, 2, 4, 8, 16, not 3$"):
        Argmax(size=48, lanes=3)
    with pytest.raises(ValueError, match=r"^Argmax.lanes \(16\) must divide size \(40\) into "
                                         r"at least 6 beats"):
        Argmax(size=40, lanes=16)
    with pytest.raises(ValueError, match=r"must divide size \(32\) into at least 6 beats"):
        Argmax(size=32, lanes=16)
