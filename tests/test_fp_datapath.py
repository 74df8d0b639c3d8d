# amaranth: UnusedElaboratable=no
import pytest

from specgen.golden.dot import AccumulatorSpec, accumulator_spec
from specgen.golden.fp import BF16, FP16, FP32
from specgen.hw.fp_datapath import ExactAccumulator, ExactMultiplier, NormalizeRound
from specgen.sim.lint import lint_component
from specgen.sim.runner import run_bench


def _fmt(fmt):
    return [fmt.exp_bits, fmt.man_bits]


@pytest.mark.sim
@pytest.mark.parametrize("fmt,stages,count", [
    pytest.param(FP16, 0, 1500, id="fp16-s0", marks=pytest.mark.slow),
    pytest.param(FP16, 2, 1500, id="fp16-s2"),
    pytest.param(FP32, 1, 1500, id="fp32-s1"),
    pytest.param(BF16, 1, 1000, id="bf16-s1", marks=pytest.mark.slow),
])
def test_exact_multiplier(fmt, stages, count):
    dut = ExactMultiplier(fmt=fmt, stages=stages)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_datapath", testcase="multiplier",
              params={"fmt": _fmt(fmt), "latency": dut.latency, "count": count})


@pytest.mark.sim
@pytest.mark.parametrize("lanes,n,stages", [
    pytest.param(1, 7, 0, id="x1-n7-s0"),
    pytest.param(3, 64, 1, id="x3-n64-s1"),
    pytest.param(2, 5, 1, id="x2-n5-s1", marks=pytest.mark.slow),
])
def test_exact_accumulator(lanes, n, stages):
    spec = accumulator_spec(FP16, n)
    dut = ExactAccumulator(spec=spec, sig_bits=2 * FP16.precision, lanes=lanes, stages=stages)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_datapath", testcase="accumulator",
              params={"fmt": _fmt(FP16), "lanes": lanes, "n": n, "dots": 120})


@pytest.mark.sim
@pytest.mark.parametrize("fmt_out,n,stages", [
    pytest.param(FP32, 64, 2, id="fp32-n64-s2"),
    pytest.param(FP16, 64, 4, id="fp16-n64-s4"),
    pytest.param(FP16, 3, 0, id="fp16-n3-s0"),
    pytest.param(FP32, 4096, 1, id="fp32-n4096-s1", marks=pytest.mark.slow),
])
def test_normalize_round(fmt_out, n, stages):
    dut = NormalizeRound(spec=accumulator_spec(FP16, n), fmt_out=fmt_out, stages=stages)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_datapath", testcase="normalize_round",
              params={"fmt": _fmt(FP16), "fmt_out": _fmt(fmt_out), "n": n,
                      "latency": dut.latency, "count": 1000})


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("fmt_out", [pytest.param(FP16, id="fp16"), pytest.param(FP32, id="fp32")])
def test_datapath_long(fmt_out):
    dut = ExactMultiplier(fmt=FP16, stages=1)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_datapath", testcase="multiplier",
              params={"fmt": _fmt(FP16), "latency": 1, "count": 100_000})
    dut = ExactAccumulator(spec=accumulator_spec(FP16, 128), sig_bits=22, lanes=3)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_datapath", testcase="accumulator",
              params={"fmt": _fmt(FP16), "lanes": 3, "n": 128, "dots": 5000})
    dut = NormalizeRound(spec=accumulator_spec(FP16, 128), fmt_out=fmt_out, stages=2)
    run_bench(dut, name=dut.module_name, module="specgen.sim.fp_datapath", testcase="normalize_round",
              params={"fmt": _fmt(FP16), "fmt_out": _fmt(fmt_out), "n": 128, "latency": 2,
                      "count": 50_000})


@pytest.mark.parametrize("make", [
    pytest.param(lambda: ExactMultiplier(fmt=FP16, stages=2), id="multiplier"),
    pytest.param(lambda: ExactAccumulator(spec=accumulator_spec(FP16, 64), sig_bits=22, lanes=3),
                 id="accumulator"),
    pytest.param(lambda: NormalizeRound(spec=accumulator_spec(FP16, 64), fmt_out=FP16, stages=4),
                 id="normalize-round"),
])
def test_fp_datapath_lint(make, tmp_path):
    dut = make()
    ok, output = lint_component(dut, folder=tmp_path)
    assert ok, output


@pytest.mark.parametrize("make,exc,message", [
    (lambda: ExactMultiplier(fmt=16), TypeError, "ExactMultiplier.fmt must be an FPFormat, not 16"),
    (lambda: ExactMultiplier(fmt=FP16, stages=3), ValueError,
     "ExactMultiplier.stages must be an integer in [0, 2], not 3"),
    (lambda: ExactAccumulator(spec=(1, 2), sig_bits=22), TypeError,
     "ExactAccumulator.spec must be a golden.dot.AccumulatorSpec, not (1, 2)"),
    (lambda: ExactAccumulator(spec=accumulator_spec(FP16, 4), sig_bits=22, lanes=0), ValueError,
     "ExactAccumulator.lanes must be an integer >= 1, not 0"),
    (lambda: ExactAccumulator(spec=accumulator_spec(FP16, 4), sig_bits=22, stages=2), ValueError,
     "ExactAccumulator.stages must be an integer in [0, 1], not 2"),
    (lambda: NormalizeRound(spec=accumulator_spec(FP16, 4), fmt_out="fp32"), TypeError,
     "NormalizeRound.fmt_out must be an FPFormat, not 'fp32'"),
    (lambda: NormalizeRound(spec=accumulator_spec(FP16, 4), fmt_out=FP32, stages=5), ValueError,
     "NormalizeRound.stages must be an integer in [0, 4], not 5"),
    (lambda: NormalizeRound(spec=AccumulatorSpec(lsb_exp=-200, msb_exp=-190, n=1), fmt_out=FP16),
     ValueError, ("NormalizeRound.spec must reach the normal range of fmt_out "
                  "(top bit weight 2**-190 < 2**-14)")),
])
def test_fp_datapath_rejects_bad_parameters(make, exc, message):
    with pytest.raises(exc) as info:
        make()
    assert str(info.value) == message


def test_fp_datapath_properties():
    spec = accumulator_spec(FP16, 64)
    assert ExactMultiplier(fmt=FP16, stages=2).latency == 2
    assert ExactMultiplier(fmt=FP16, stages=1).module_name == "ExactMultiplier_e5_m10_s1"
    acc = ExactAccumulator(spec=spec, sig_bits=22, lanes=3, stages=1)
    assert acc.latency == 2 and acc.acc.shape().width == spec.width == 87
    nr = NormalizeRound(spec=spec, fmt_out=FP32, stages=3)
    assert nr.latency == 3 and nr.result.shape().width == 32

