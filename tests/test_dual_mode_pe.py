# amaranth: UnusedElaboratable=no
import pytest

from specgen.golden.bsfp import BSFPConfig
from specgen.golden.fp import BF16, FP16, FP32
from specgen.hw.dual_mode_pe import DualModePE
from specgen.sim.lint import lint_component
from specgen.sim.runner import run_bench

TESTS = ["random_traffic", "full_rate", "reset_mid_stream"]



def _bench(pe, *, tests=TESTS, dots=40, mode=None, config=None):
    run_bench(pe, name=pe.module_name, module="specgen.sim.dual_mode_pe", testcase=tests,
              params={"fmt_out": [pe.fmt_out.exp_bits, pe.fmt_out.man_bits], "n": pe.n,
                      "lanes": pe.quant_lanes, "latency": pe.latency, "dots": dots,
                      "mode": mode, "config": config or {}})


@pytest.mark.sim
@pytest.mark.parametrize("fmt_out,n,lanes,stages", [
    # The exact array is a library block now (the presets use dspfp32): make test keeps
    # the board rounding and the smallest FP16 PE, make test-slow the rest.
    pytest.param(FP32, 16, 3, (1, 1, 2), id="fp32-n16-q3", marks=pytest.mark.slow),
    # The board presets' rounding pipeline (PipelineConfig.pe_round_stages = 4).
    pytest.param(FP32, 16, 3, (1, 1, 4), id="fp32-n16-q3-s114"),
    pytest.param(FP16, 9, 2, (2, 0, 3), id="fp16-n9-q2", marks=pytest.mark.slow),
    pytest.param(FP16, 5, 1, (0, 0, 1), id="fp16-n5-q1-s001"),
])
def test_dual_mode_pe(fmt_out, n, lanes, stages):
    mul, acc, rnd = stages
    pe = DualModePE(fmt_out=fmt_out, n=n, quant_lanes=lanes, mul_stages=mul, acc_stages=acc,
                    round_stages=rnd)
    _bench(pe)


@pytest.mark.sim
@pytest.mark.slow
def test_dual_mode_pe_other_drafts():
    """The draft table is read from golden: the no-remap draft and the upper representative."""
    pe = DualModePE(fmt_out=FP32, n=8, quant_lanes=3,
                    config=BSFPConfig(draft="E3M0-noremap", pair_representative="upper"))
    _bench(pe, tests=["random_traffic"], dots=30, mode=1,
           config={"draft": "E3M0-noremap", "pair_representative": "upper"})


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("fmt_out", [pytest.param(FP16, id="fp16"), pytest.param(FP32, id="fp32")])
def test_dual_mode_pe_long(fmt_out):
    pe = DualModePE(fmt_out=fmt_out, n=128, quant_lanes=3)
    _bench(pe, dots=300)


@pytest.mark.parametrize("kwargs", [
    pytest.param({}, id="default"),
    pytest.param({"fmt_out": FP16, "n": 7, "quant_lanes": 1, "mul_stages": 0, "acc_stages": 0,
                  "round_stages": 1}, id="small"),
])
def test_dual_mode_pe_lint(kwargs, tmp_path):
    pe = DualModePE(**kwargs)
    ok, output = lint_component(pe, folder=tmp_path)
    assert ok, output


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"fmt_out": BF16}, ValueError,
     "DualModePE.fmt_out must be one of FP16, FP32, not FPFormat(exp_bits=8, man_bits=7)"),
    ({"n": 0}, ValueError, "DualModePE.n must be an integer >= 1, not 0"),
    ({"quant_lanes": 9}, ValueError, "DualModePE.quant_lanes must be an integer in [1, 8], not 9"),
    ({"quant_lanes": 2.0}, TypeError, "DualModePE.quant_lanes must be an integer in [1, 8], not 2.0"),
    ({"config": "E3M0"}, TypeError, "DualModePE.config must be a BSFPConfig, not 'E3M0'"),
    ({"config": BSFPConfig(draft="E2M1")}, ValueError,
     "DualModePE.config.draft must be one of 'E3M0', 'E3M0-noremap', not 'E2M1'"),
    ({"mul_stages": 3}, ValueError, "DualModePE.mul_stages must be an integer in [0, 2], not 3"),
    ({"acc_stages": -1}, ValueError, "DualModePE.acc_stages must be an integer in [0, 1], not -1"),
    ({"round_stages": 0}, ValueError, "DualModePE.round_stages must be an integer in [1, 4], not 0"),
])
def test_dual_mode_pe_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        DualModePE(**kwargs)
    assert str(info.value) == message


def test_dual_mode_pe_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        DualModePE(FP32)


def test_dual_mode_pe_properties():
    pe = DualModePE(fmt_out=FP16, n=64, quant_lanes=3, mul_stages=1, acc_stages=1, round_stages=2)
    assert pe.latency == 6
    assert pe.spec.width == 87 and (pe.spec.lsb_exp, pe.spec.msb_exp) == (-48, 32)
    assert pe.o.payload.shape().width == 16
    assert pe.module_name == "DualModePE_e5m10_n64_q3_s112"
