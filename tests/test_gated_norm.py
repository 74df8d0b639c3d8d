import dataclasses

import pytest

from specgen.golden.config import preset
from specgen.golden.fp import FP16
from specgen.golden.nonlinear import LUTSpec
from specgen.golden.rmsnorm import RSQRT_LUT
from specgen.hw.gated_norm import NARROW_STAGES, GatedRMSNorm
from specgen.sim.lint import lint_component
from specgen.sim.runner import BenchFailure, run_bench

SIM = preset("sim")


def _params(dut, **extra):
    return {"size": dut.size, "gate": dut.gate, "lanes": dut.lanes, "contract": dut._ops.contract,
            "out16": dut.out_fmt is FP16,
            "silu_lut": dataclasses.asdict(dut._silu_spec),
            "rsqrt_lut": dataclasses.asdict(dut._rsqrt_spec), "eps": dut._eps,
            "latency": dut.latency, "pair_cycles": dut.pair_cycles, **extra}


def _run(dut, *, testcase=None, **extra):
    return run_bench(dut, name=dut.module_name, module="specgen.sim.gated_norm", testcase=testcase,
                     params=_params(dut, **extra))


@pytest.mark.sim
def test_gated_norm_sim_preset():
    """The sim preset's layer norm (d_inner = 4, "ieee", 2 lanes: two beats a vector)
    under every scenario."""
    dut = GatedRMSNorm.from_config(SIM)
    assert dut.lanes == SIM.vector.lanes == 2 and dut.beats == 2
    _run(dut)


@pytest.mark.sim
@pytest.mark.parametrize("lanes", [1, 4])
def test_gated_norm_binary16_output(lanes):
    """The pre-norm feeding ``in_proj`` (no gate, d_model = 16) with its output rounded to
    the linear engine's binary16, every scenario: ``golden.fp.convert`` of the binary32
    result, bit for bit, the latency NARROW_STAGES (3) cycles longer; one lane, and four (VHK158's: four
    partial sums, the tree two adders deep)."""
    dut = GatedRMSNorm(size=16, gate=False, silu_lut=SIM.ssm.silu_lut, out_fmt=FP16, lanes=lanes)
    ref = GatedRMSNorm(size=16, gate=False, silu_lut=SIM.ssm.silu_lut, lanes=lanes)
    assert len(dut.o.payload) == 16 * lanes and dut.latency == ref.latency + NARROW_STAGES == ref.latency + 3
    assert dut.module_name == ref.module_name.replace("_l4", "") + "_o16" + (
        "_l4" if lanes == 4 else "")
    _run(dut)


# The default suite builds the norm once (sim preset); the board contract's build runs with the slow set.
@pytest.mark.sim
@pytest.mark.slow
def test_gated_norm_dspfp32_odd_size():
    """DSPFP32 slices (flush to zero, the sum of squares on one slice's P), 12 elements
    (1/12 rounded), no gate (the final norm)."""
    _run(GatedRMSNorm(size=12, gate=False, silu_lut=SIM.ssm.silu_lut, contract="dspfp32"))


@pytest.mark.sim
def test_gated_norm_bench_can_fail():
    """A wrong sign in one expected output makes the bench fail."""
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        _run(GatedRMSNorm.from_config(SIM), testcase="random_flow", corrupt=True)


@pytest.mark.sim
@pytest.mark.slow
def test_gated_norm_dspfp32_bench_tells_the_contracts_apart():
    """The DSPFP32 block checked against the "ieee" golden fails: the vectors'
    subnormals and tiny squares reach the flushes."""
    dut = GatedRMSNorm(size=12, gate=False, silu_lut=SIM.ssm.silu_lut, contract="dspfp32")
    with pytest.raises(BenchFailure, match="1 of 1 cocotb tests failed"):
        run_bench(dut, name=dut.module_name, module="specgen.sim.gated_norm", testcase="random_flow",
                  params={**_params(dut), "contract": "ieee"})


@pytest.mark.parametrize("out_fmt", ["fp32", "fp16"])
def test_gated_norm_lint(tmp_path, out_fmt):
    from specgen.golden.fp import FP32
    dut = GatedRMSNorm(size=4, silu_lut=LUTSpec(function="silu", lo=-2.0, hi=2.0, step_log2=3),
                       rsqrt_lut=LUTSpec(function="rsqrt", lo=1.0, hi=4.0, step_log2=3),
                       mul_stages=1, add_stages=1, out_fmt={"fp32": FP32, "fp16": FP16}[out_fmt])
    ok, out = lint_component(dut, folder=tmp_path)
    assert ok, out


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_gated_norm_properties_and_errors():
    silu = SIM.ssm.silu_lut
    dut = GatedRMSNorm(size=16, silu_lut=silu, mul_stages=2, add_stages=3)
    lut = 5 + 2 + 3 * 5                                   # a LUTFunction with m2a3
    gate, acc = lut + 2, 2 + 1
    tail = 1 + 2 + 3 + 1 + lut + 1
    emit = 1 + 2 * 2
    assert dut.latency == gate + acc + tail + 1 + emit + 1
    assert dut.pair_cycles == 2 * 16 - 2 + dut.latency - emit
    dsp = GatedRMSNorm(size=16, silu_lut=silu, gate=False, contract="dspfp32")
    assert dsp.latency == 0 + 4 + (1 + 3 + 4 + 1 + (5 + 2 + 12) + 1) + 1 + (1 + 6) + 1
    assert dsp.module_name == "GatedRMSNorm_n16_nogate_rsqrt_s7_dsp"
    # Four lanes: a tree of two DSP adders (4 cycles each) before the mean, a quarter of
    # the beats.
    dsp4 = GatedRMSNorm(size=16, silu_lut=silu, gate=False, contract="dspfp32", lanes=4)
    assert dsp4.latency == dsp.latency + 2 * 4 and dsp4.beats == 4
    assert dsp4.pair_cycles == 2 * 4 - 2 + dsp4.latency - (1 + 6)
    assert dsp4.module_name == "GatedRMSNorm_n16_nogate_rsqrt_s7_dsp_l4"
    assert dsp4.i.payload.shape().size == 2 * 4 * 32 and len(dsp4.o.payload) == 4 * 32
    with pytest.raises(ValueError, match=r"^GatedRMSNorm.lanes must be a power of two dividing "
                                         r"size \(12\), not 8$"):
        GatedRMSNorm(size=12, silu_lut=silu, lanes=8)
    board = GatedRMSNorm.from_config(preset("vck190"))
    assert board.size == 5120 and board.module_name.endswith("_dsp_l4") and board.lanes == 4
    with pytest.raises(ValueError, match=r"^GatedRMSNorm.size must be an integer >= 2, not 1$"):
        GatedRMSNorm(size=1, silu_lut=silu)
    with pytest.raises(ValueError, match=r"^GatedRMSNorm.out_fmt must be FP32 or FP16 \(golden.fp\), "
                                         r"not 'fp16'$"):
        GatedRMSNorm(size=4, silu_lut=silu, out_fmt="fp16")
    with pytest.raises(TypeError, match=r"^GatedRMSNorm.rsqrt_lut must be a LUTSpec of 'rsqrt'"):
        GatedRMSNorm(size=4, silu_lut=silu, rsqrt_lut=silu)
    with pytest.raises(ValueError, match=r"^GatedRMSNorm.rsqrt_lut must cover \[1.0, 4.0\], "
                                         r"not \[1.0, 2.0\]$"):
        GatedRMSNorm(size=4, silu_lut=silu,
                     rsqrt_lut=LUTSpec(function="rsqrt", lo=1.0, hi=2.0))
    with pytest.raises(TypeError, match=r"^GatedRMSNorm.gate must be True or False, not 1$"):
        GatedRMSNorm(size=4, silu_lut=silu, gate=1)
    with pytest.raises(ValueError, match=r"^GatedRMSNorm.eps must be a finite number in "
                                         r"\[0.0, 1.0\], not 2.0$"):
        GatedRMSNorm(size=4, silu_lut=silu, eps=2.0)
    assert RSQRT_LUT.nodes == 385
